// Zip archives, as far as NPZ files (np.savez, np.savez_compressed) need them: reading the
// central directory and one member at a time (stored or deflate, zip64 when sizes demand
// it, CRC-32 checked), and writing an archive of members held in memory. zlib does the
// deflate and the CRC; the container is ours.
//
// Layout (PKWARE's APPNOTE): each member is a local header (signature PK\3\4, method,
// CRC-32, sizes, name, extra field) followed by its data; then the central directory, one
// record per member (PK\1\2: the same fields plus where the local header starts), and the
// end-of-central-directory record (PK\5\6: how many records, where the directory is),
// found by searching back from the end past an optional comment. Sizes and offsets that
// do not fit 32 bits (or a count past 65535) are 0xFFFF... in those records and given in a
// zip64 extra field (id 1) and a zip64 end record (PK\6\6, located by PK\6\7).
//
// Note [Zip validation]: one disk only; the directory inside the file and before its end
// record; as many records as the end record says, each inside the directory, with its
// zip64 fields present when flagged; unique names; a member's local header signature at
// its offset and its data inside the file before the directory. Reading a member refuses
// encryption, methods other than stored (0) and deflate (8), a stored member whose sizes
// differ, a declared expansion beyond deflate's maximum (kMaxDeflateRatio: a corrupt
// entry or a zip bomb), inflated data longer or shorter than declared or corrupt, and a
// CRC-32 mismatch. Archive::read's output grows with the data actually inflated, never
// to a size a header merely claims; a MemberReader writes into the caller's memory (NPZ
// arrays inflate straight into their tensor, sized from the NPY header, which may claim
// no more than the member's declared size, itself at most 1032 times its compressed
// bytes). Every violation is a kiln::Error naming the archive (and the member).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/byte_source.h"

struct z_stream_s;  // zlib's inflate state (zlib.h), private to MemberReader

namespace kiln::data::zip {

// Deflate cannot expand data by more than about 1032:1 (258-byte matches in 2-bit codes).
inline constexpr int64_t kMaxDeflateRatio = 1032;

struct Entry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint32_t crc32 = 0;
  int64_t compressed_size = 0;
  int64_t size = 0;  // uncompressed
  int64_t local_header_offset = 0;
};

class MemberReader;

class Archive {
 public:
  // Opens `path` and reads its central directory (Note [Zip validation]).
  explicit Archive(const std::string& path);
  // An archive in memory; `name` is what messages call it. The bytes must outlive it.
  Archive(std::span<const uint8_t> bytes, std::string_view name);

  const std::string& name() const { return source_->name(); }
  const std::vector<Entry>& entries() const { return entries_; }
  // The member called `member`, or null.
  const Entry* find(std::string_view member) const;
  // A member's uncompressed bytes, CRC-checked.
  std::vector<uint8_t> read(const Entry& entry) const;
  // The first min(n, entry.size) uncompressed bytes, inflating no further (not CRC-checked:
  // for reading a member's header without its data).
  std::vector<uint8_t> read_prefix(const Entry& entry, int64_t n) const;

 private:
  friend class MemberReader;
  void read_directory();
  int64_t data_start(const Entry& entry) const;

  std::unique_ptr<ByteSource> source_;
  std::vector<Entry> entries_;
  int64_t directory_offset_ = 0;
};

// A member's uncompressed bytes as a ByteSource read front to back, so a reader (NPY's)
// can put them straight where they belong, with no buffer of the whole member: read()
// takes offsets at or past the end of the previous read (a gap is inflated and dropped;
// an offset behind is an internal error), the CRC-32 is summed as the bytes pass, and
// finish() inflates the rest, then checks the member's size and CRC-32. The archive and
// entry must outlive it. Every refusal of Note [Zip validation] applies.
class MemberReader final : public ByteSource {
 public:
  // `name` is what messages of the member's own reader call it ("data.npz/x.npy").
  MemberReader(const Archive& archive, const Entry& entry, std::string name);
  ~MemberReader() override;
  MemberReader(const MemberReader&) = delete;
  MemberReader& operator=(const MemberReader&) = delete;

  int64_t size() const override { return entry_.size; }
  void read(int64_t offset, void* dst, int64_t n) const override;
  void finish() const;

 private:
  // The next n bytes into dst (dropped when dst is null).
  void pull(uint8_t* dst, int64_t n) const;
  // Compressed bytes for the inflater; false when none are left.
  bool refill() const;

  const Archive& archive_;
  const Entry& entry_;
  int64_t start_;  // where the member's data begins in the archive
  mutable z_stream_s* stream_ = nullptr;  // deflate members only
  mutable std::vector<uint8_t> chunk_;
  mutable int64_t consumed_ = 0;  // compressed bytes handed to the inflater
  mutable int64_t position_ = 0;  // uncompressed bytes produced
  mutable unsigned long crc_ = 0;
  mutable bool ended_ = false;    // the deflate stream's end was reached
};

// A member to write: its name and uncompressed bytes.
struct NewMember {
  std::string name;
  std::string_view bytes;
};

// The archive's bytes: members in order, deflated (level 6, as Python's zipfile) when
// `compress`, else stored; timestamps fixed at 1980-01-01 so the bytes depend on the
// contents only. Zip64 records are written where a size, an offset or the count needs
// them, or in every record with `force_zip64` (which the tests use to reach the reader's
// zip64 paths with small files).
std::string write_archive(const std::vector<NewMember>& members, bool compress, bool force_zip64 = false);

}  // namespace kiln::data::zip
