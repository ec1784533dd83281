// Zip reading and writing (data/zip.h): the end record found from the back, zip64 records
// when flagged, the central directory parsed into Entry records under Note [Zip
// validation]; members read front to back by MemberReader (zlib's raw inflate in chunks
// from the ByteSource, the CRC-32 summed on the way), whole or by prefix; archives written
// with zlib's raw deflate.
#include "data/zip.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/checked_math.h"
#include "core/error.h"
#include "data/deflate.h"

namespace kiln::data::zip {
namespace {

constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr int64_t kLocalBytes = 30, kCentralBytes = 46, kEndBytes = 22, kZip64EndBytes = 56,
                  kLocatorBytes = 20;
constexpr int64_t kMaxComment = 65535;
constexpr uint32_t k32 = 0xffffffff;
constexpr uint16_t kZip64ExtraId = 1;
constexpr int64_t kChunk = int64_t{1} << 18;  // compressed bytes read per inflate step

template <typename... Parts>
[[noreturn]] void fail(const std::string& archive, const Parts&... parts) {
  detail::throw_user_error(detail::str_cat("zip: ", archive, ": ", parts...));
}

// Little-endian fields of a record held in memory, bounds-checked by the caller.
uint64_t field(const uint8_t* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

void put(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// The zip64 extra field's values replace, in this order, the fields that were 0xFFFFFFFF.
void apply_zip64_extra(const std::string& archive, const uint8_t* extra, int64_t length, Entry& entry,
                       bool size_flagged, bool compressed_flagged, bool offset_flagged) {
  for (int64_t at = 0; at + 4 <= length;) {
    const uint64_t id = field(extra + at, 2), bytes = field(extra + at + 2, 2);
    if (at + 4 + static_cast<int64_t>(bytes) > length)
      fail(archive, "member '", entry.name, "': extra field overruns");
    if (id == kZip64ExtraId) {
      const uint8_t* p = extra + at + 4;
      int64_t left = static_cast<int64_t>(bytes);
      const auto next = [&](int64_t& target) {
        if (left < 8) fail(archive, "member '", entry.name, "': zip64 extra field too short");
        const uint64_t value = field(p, 8);
        if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          fail(archive, "member '", entry.name, "': zip64 size or offset ", value, " out of range");
        }
        target = static_cast<int64_t>(value);
        p += 8;
        left -= 8;
      };
      if (size_flagged) next(entry.size);
      if (compressed_flagged) next(entry.compressed_size);
      if (offset_flagged) next(entry.local_header_offset);
      return;
    }
    at += 4 + static_cast<int64_t>(bytes);
  }
  if (size_flagged || compressed_flagged || offset_flagged) {
    fail(archive, "member '", entry.name, "': sizes marked zip64 but no zip64 extra field");
  }
}

}  // namespace

Archive::Archive(const std::string& path) : source_(std::make_unique<FileSource>(path, "zip")) {
  read_directory();
}

Archive::Archive(std::span<const uint8_t> bytes, std::string_view name)
    : source_(std::make_unique<MemorySource>(bytes, name)) {
  read_directory();
}

void Archive::read_directory() {
  const int64_t file_bytes = source_->size();
  if (file_bytes < kEndBytes) fail(name(), "too short for a zip archive (", file_bytes, " bytes)");
  // The end record: the last PK\5\6 whose comment runs exactly to the end of the file.
  const int64_t tail_bytes = std::min(file_bytes, kEndBytes + kMaxComment);
  std::vector<uint8_t> tail(static_cast<size_t>(tail_bytes));
  source_->read(file_bytes - tail_bytes, tail.data(), tail_bytes);
  int64_t end_at = -1;
  for (int64_t i = tail_bytes - kEndBytes; i >= 0; --i) {
    if (field(&tail[i], 4) == kEndSignature &&
        i + kEndBytes + static_cast<int64_t>(field(&tail[i + 20], 2)) == tail_bytes) {
      end_at = i;
      break;
    }
  }
  if (end_at < 0) fail(name(), "no end-of-central-directory record (not a zip archive, or truncated)");
  const uint8_t* end = &tail[end_at];
  const int64_t end_offset = file_bytes - tail_bytes + end_at;
  if (field(end + 4, 2) != 0 || field(end + 6, 2) != 0) fail(name(), "multi-disk archives are not supported");
  uint64_t count = field(end + 10, 2), directory_bytes = field(end + 12, 4),
           directory_offset = field(end + 16, 4);
  int64_t directory_end = end_offset;
  if (count == 0xffff || directory_bytes == k32 || directory_offset == k32) {
    if (end_offset < kLocatorBytes + kZip64EndBytes)
      fail(name(), "zip64 values but no zip64 end-record locator");
    uint8_t locator[kLocatorBytes];
    source_->read(end_offset - kLocatorBytes, locator, kLocatorBytes);
    if (field(locator, 4) != kZip64LocatorSignature)
      fail(name(), "zip64 values but no zip64 end-record locator");
    const uint64_t zip64_end = field(locator + 8, 8);
    if (zip64_end > static_cast<uint64_t>(end_offset - kLocatorBytes - kZip64EndBytes)) {
      fail(name(), "zip64 end record at ", zip64_end, " is outside the file");
    }
    uint8_t record[kZip64EndBytes];
    source_->read(static_cast<int64_t>(zip64_end), record, kZip64EndBytes);
    if (field(record, 4) != kZip64EndSignature) fail(name(), "bad zip64 end record signature");
    if (field(record + 16, 4) != 0 || field(record + 20, 4) != 0)
      fail(name(), "multi-disk archives are not supported");
    count = field(record + 32, 8);
    directory_bytes = field(record + 40, 8);
    directory_offset = field(record + 48, 8);
    directory_end = static_cast<int64_t>(zip64_end);
  }
  if (directory_offset > static_cast<uint64_t>(directory_end) ||
      directory_bytes > static_cast<uint64_t>(directory_end) - directory_offset) {
    fail(name(), "central directory (", directory_bytes, " bytes at ", directory_offset,
         ") lies outside the file's ", directory_end, " bytes before its end record");
  }
  if (count > directory_bytes / kCentralBytes) {
    fail(name(), count, " members cannot fit a ", directory_bytes, "-byte central directory");
  }
  directory_offset_ = static_cast<int64_t>(directory_offset);
  std::vector<uint8_t> directory(static_cast<size_t>(directory_bytes));
  source_->read(directory_offset_, directory.data(), static_cast<int64_t>(directory_bytes));
  int64_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (at + kCentralBytes > static_cast<int64_t>(directory_bytes) ||
        field(&directory[at], 4) != kCentralSignature) {
      fail(name(), "central directory record ", i, " is missing or corrupt");
    }
    const uint8_t* r = &directory[at];
    const int64_t name_bytes = static_cast<int64_t>(field(r + 28, 2)),
                  extra_bytes = static_cast<int64_t>(field(r + 30, 2));
    const int64_t comment_bytes = static_cast<int64_t>(field(r + 32, 2));
    const int64_t record_bytes = kCentralBytes + name_bytes + extra_bytes + comment_bytes;
    if (at + record_bytes > static_cast<int64_t>(directory_bytes))
      fail(name(), "central directory record ", i, " overruns");
    Entry entry;
    entry.name.assign(reinterpret_cast<const char*>(r + kCentralBytes), static_cast<size_t>(name_bytes));
    entry.flags = static_cast<uint16_t>(field(r + 8, 2));
    entry.method = static_cast<uint16_t>(field(r + 10, 2));
    entry.crc32 = static_cast<uint32_t>(field(r + 16, 4));
    const uint64_t compressed = field(r + 20, 4), size = field(r + 24, 4), offset = field(r + 42, 4);
    entry.compressed_size = static_cast<int64_t>(compressed);
    entry.size = static_cast<int64_t>(size);
    entry.local_header_offset = static_cast<int64_t>(offset);
    apply_zip64_extra(name(), r + kCentralBytes + name_bytes, extra_bytes, entry, size == k32,
                      compressed == k32, offset == k32);
    if (find(entry.name) != nullptr) fail(name(), "member '", entry.name, "' appears twice");
    entries_.push_back(std::move(entry));
    at += record_bytes;
  }
}

const Entry* Archive::find(std::string_view member) const {
  const auto it =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == member; });
  return it == entries_.end() ? nullptr : &*it;
}

int64_t Archive::data_start(const Entry& entry) const {
  if (entry.flags & 1) fail(name(), "member '", entry.name, "' is encrypted");
  if (entry.method != 0 && entry.method != 8) {
    fail(name(), "member '", entry.name, "' uses compression method ", entry.method,
         " (Kiln reads stored (0) and deflate (8), what numpy writes)");
  }
  if (entry.local_header_offset > directory_offset_ - kLocalBytes) {
    fail(name(), "member '", entry.name, "': local header at ", entry.local_header_offset,
         " is outside the file");
  }
  uint8_t local[kLocalBytes];
  source_->read(entry.local_header_offset, local, kLocalBytes);
  if (field(local, 4) != kLocalSignature)
    fail(name(), "member '", entry.name, "': bad local header signature");
  const int64_t start = entry.local_header_offset + kLocalBytes + static_cast<int64_t>(field(local + 26, 2)) +
                        static_cast<int64_t>(field(local + 28, 2));
  if (start > directory_offset_ || entry.compressed_size > directory_offset_ - start) {
    fail(name(), "member '", entry.name, "': its ", entry.compressed_size,
         " bytes of data run past the file");
  }
  return start;
}

MemberReader::MemberReader(const Archive& archive, const Entry& entry, std::string name)
    : ByteSource(std::move(name)), archive_(archive), entry_(entry), start_(archive.data_start(entry)) {
  crc_ = crc32(0L, Z_NULL, 0);
  if (entry.method == 0) {
    if (entry.compressed_size != entry.size) {
      fail(archive.name(), "member '", entry.name, "' is stored but its sizes differ (", entry.compressed_size,
           " and ", entry.size, ")");
    }
    return;
  }
  const std::optional<int64_t> most = checked_mul(std::max<int64_t>(entry.compressed_size, 1), kMaxDeflateRatio);
  if (most && entry.size > *most) {
    fail(archive.name(), "member '", entry.name, "' claims ", entry.size, " bytes from ", entry.compressed_size,
         " compressed, more than deflate can expand (a corrupt entry or a zip bomb)");
  }
  stream_ = new z_stream{};
  if (inflateInit2(stream_, -MAX_WBITS) != Z_OK) {
    delete stream_;
    stream_ = nullptr;
    fail(archive.name(), "zlib: inflateInit2 failed");
  }
}

MemberReader::~MemberReader() {
  if (stream_ != nullptr) {
    inflateEnd(stream_);
    delete stream_;
  }
}

bool MemberReader::refill() const {
  const int64_t n = std::min(kChunk, entry_.compressed_size - consumed_);
  if (n == 0) return false;
  chunk_.resize(static_cast<size_t>(n));
  archive_.source_->read(start_ + consumed_, chunk_.data(), n);
  consumed_ += n;
  stream_->next_in = chunk_.data();
  stream_->avail_in = static_cast<uInt>(n);
  return true;
}

void MemberReader::pull(uint8_t* dst, int64_t n) const {
  std::vector<uint8_t> scratch;  // for bytes that are dropped
  while (n > 0) {
    const int64_t step = std::min<int64_t>(n, dst != nullptr ? int64_t{1} << 30 : kChunk);
    uint8_t* out = dst;
    if (out == nullptr) {
      scratch.resize(static_cast<size_t>(step));
      out = scratch.data();
    }
    int64_t produced = step;
    if (stream_ == nullptr) {  // stored
      archive_.source_->read(start_ + position_, out, step);
    } else {
      if (ended_) {
        fail(archive_.name(), "member '", entry_.name, "' inflates to ", position_, " bytes, not its declared ",
             entry_.size);
      }
      if (stream_->avail_in == 0 && !refill()) {
        fail(archive_.name(), "member '", entry_.name, "': deflate data ends early (truncated or corrupt)");
      }
      stream_->next_out = out;
      stream_->avail_out = static_cast<uInt>(step);
      const int status = inflate(stream_, Z_NO_FLUSH);
      if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
        fail(archive_.name(), "member '", entry_.name, "': corrupt deflate data (zlib: ",
             stream_->msg != nullptr ? stream_->msg : "error " + std::to_string(status), ")");
      }
      ended_ = status == Z_STREAM_END;
      produced = step - static_cast<int64_t>(stream_->avail_out);
    }
    crc_ = crc32(crc_, out, static_cast<uInt>(produced));
    position_ += produced;
    n -= produced;
    if (dst != nullptr) dst += produced;
  }
}

void MemberReader::read(int64_t offset, void* dst, int64_t n) const {
  KILN_ASSERT(offset >= position_ && n >= 0 && offset + n <= entry_.size, "zip: member '", entry_.name,
              "' read at ", offset, " after ", position_, " bytes (reads go front to back)");
  pull(nullptr, offset - position_);
  pull(static_cast<uint8_t*>(dst), n);
}

void MemberReader::finish() const {
  pull(nullptr, entry_.size - position_);
  if (stream_ != nullptr && !ended_) {
    // All declared bytes are out; the stream must end here, not hold more.
    uint8_t extra = 0;
    for (;;) {
      if (stream_->avail_in == 0 && !refill()) {
        fail(archive_.name(), "member '", entry_.name, "': deflate data ends early (truncated or corrupt)");
      }
      stream_->next_out = &extra;
      stream_->avail_out = 1;
      const int status = inflate(stream_, Z_NO_FLUSH);
      if (stream_->avail_out == 0) {
        fail(archive_.name(), "member '", entry_.name, "' inflates to more than its declared ", entry_.size,
             " bytes");
      }
      if (status == Z_STREAM_END) break;
      if (status != Z_OK && status != Z_BUF_ERROR) {
        fail(archive_.name(), "member '", entry_.name, "': corrupt deflate data (zlib: ",
             stream_->msg != nullptr ? stream_->msg : "error " + std::to_string(status), ")");
      }
    }
    ended_ = true;
  }
  if (crc_ != entry_.crc32) fail(archive_.name(), "member '", entry_.name, "': CRC-32 mismatch (the archive is corrupt)");
}

std::vector<uint8_t> Archive::read(const Entry& entry) const {
  const MemberReader reader(*this, entry, name());
  // The buffer grows with the bytes that actually arrive (doubling), never to a size the
  // entry merely claims.
  std::vector<uint8_t> bytes;
  while (static_cast<int64_t>(bytes.size()) < entry.size) {
    const auto have = static_cast<int64_t>(bytes.size());
    const int64_t more = std::min(entry.size - have, std::max(kChunk, have));
    bytes.resize(static_cast<size_t>(have + more));
    reader.read(have, bytes.data() + have, more);
  }
  reader.finish();
  return bytes;
}

std::vector<uint8_t> Archive::read_prefix(const Entry& entry, int64_t n) const {
  const MemberReader reader(*this, entry, name());
  std::vector<uint8_t> bytes(static_cast<size_t>(std::clamp<int64_t>(n, 0, entry.size)));
  reader.read(0, bytes.data(), static_cast<int64_t>(bytes.size()));
  return bytes;
}

// ---- writing -------------------------------------------------------------------------------

std::string write_archive(const std::vector<NewMember>& members, bool compress, bool force_zip64) {
  std::string out, directory;
  constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01
  for (const NewMember& member : members) {
    KILN_CHECK(member.bytes.size() < (uint64_t{1} << 32), "zip: member '", member.name,
               "' is 4 GiB or more; one deflate call here takes less (split the array)");
    KILN_CHECK(member.name.size() <= 0xffff, "zip: member name of ", member.name.size(), " bytes");
    const std::string data = compress ? deflated(member.bytes, DeflateWrapper::Raw) : std::string(member.bytes);
    const uint32_t crc =
        static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(member.bytes.data()),
                                    static_cast<uInt>(member.bytes.size())));
    const uint64_t offset = out.size();
    const bool zip64 = force_zip64 || data.size() >= k32 || member.bytes.size() >= k32 || offset >= k32;
    const uint16_t method = compress ? 8 : 0, version = zip64 ? 45 : 20;
    const auto common = [&](std::string& record, uint16_t extra_bytes) {  // the fields both records share
      put(record, version, 2);                                            // version needed to extract
      put(record, 0, 2);                                                  // flags
      put(record, method, 2);
      put(record, 0, 2);  // time
      put(record, kDosDate, 2);
      put(record, crc, 4);
      put(record, zip64 ? k32 : data.size(), 4);
      put(record, zip64 ? k32 : member.bytes.size(), 4);
      put(record, member.name.size(), 2);
      put(record, extra_bytes, 2);
    };
    // local header: the zip64 extra holds both sizes
    put(out, kLocalSignature, 4);
    common(out, zip64 ? 20 : 0);
    out += member.name;
    if (zip64) {
      put(out, kZip64ExtraId, 2);
      put(out, 16, 2);
      put(out, member.bytes.size(), 8);
      put(out, data.size(), 8);
    }
    out += data;
    // central record: the zip64 extra holds both sizes and the offset
    put(directory, kCentralSignature, 4);
    put(directory, version, 2);  // version made by
    common(directory, zip64 ? 28 : 0);
    put(directory, 0, 2);  // comment
    put(directory, 0, 2);  // disk
    put(directory, 0, 2);  // internal attributes
    put(directory, 0, 4);  // external attributes
    put(directory, zip64 ? k32 : offset, 4);
    directory += member.name;
    if (zip64) {
      put(directory, kZip64ExtraId, 2);
      put(directory, 24, 2);
      put(directory, member.bytes.size(), 8);
      put(directory, data.size(), 8);
      put(directory, offset, 8);
    }
  }
  const uint64_t directory_offset = out.size(), count = members.size();
  out += directory;
  const bool zip64_end = force_zip64 || count >= 0xffff || directory_offset >= k32 || directory.size() >= k32;
  if (zip64_end) {
    const uint64_t record_offset = out.size();
    put(out, kZip64EndSignature, 4);
    put(out, kZip64EndBytes - 12, 8);
    put(out, 45, 2);
    put(out, 45, 2);
    put(out, 0, 4);
    put(out, 0, 4);
    put(out, count, 8);
    put(out, count, 8);
    put(out, directory.size(), 8);
    put(out, directory_offset, 8);
    put(out, kZip64LocatorSignature, 4);
    put(out, 0, 4);
    put(out, record_offset, 8);
    put(out, 1, 4);
  }
  put(out, kEndSignature, 4);
  put(out, 0, 2);
  put(out, 0, 2);
  put(out, zip64_end ? 0xffff : count, 2);
  put(out, zip64_end ? 0xffff : count, 2);
  put(out, zip64_end ? k32 : directory.size(), 4);
  put(out, zip64_end ? k32 : directory_offset, 4);
  put(out, 0, 2);
  return out;
}

}  // namespace kiln::data::zip
