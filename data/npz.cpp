// NPZ reading and writing (data/npz.h): members found by name in the zip directory; a
// member's NPY header read from its inflated prefix (through a ByteSource that knows the
// member's full size, so npy::read_header checks the data length as for a file); a whole
// member inflated, CRC-checked and loaded by npy::load from memory.
#include "data/npz.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace kiln::data::npz {
namespace {

constexpr std::string_view kSuffix = ".npy";

// The first bytes of a member standing for all of it: size() is the member's declared
// size, and npy::read_header reads no further than its header. A member whose deflate
// data ends before the header does (corrupt) is refused when the header is read.
class PrefixSource final : public ByteSource {
 public:
  PrefixSource(std::vector<uint8_t> prefix, int64_t size, std::string name)
      : ByteSource(std::move(name)), prefix_(std::move(prefix)), size_(size) {}
  int64_t size() const override { return size_; }
  void read(int64_t offset, void* dst, int64_t n) const override {
    KILN_CHECK(offset + n <= static_cast<int64_t>(prefix_.size()), "npy: ", name(), ": the member's data ends at byte ",
               prefix_.size(), ", inside its NPY header (a corrupt or truncated archive)");
    if (n > 0) std::memcpy(dst, prefix_.data() + offset, static_cast<size_t>(n));
  }

 private:
  std::vector<uint8_t> prefix_;
  int64_t size_;
};

bool is_array(const zip::Entry& entry) {
  return entry.name.size() > kSuffix.size() && entry.name.ends_with(kSuffix);
}

}  // namespace

File::File(const std::string& path) : archive_(path) {}

File::File(std::span<const uint8_t> bytes, std::string_view name) : archive_(bytes, name) {}

std::string File::member_name(const zip::Entry& entry) const { return archive_.name() + "/" + entry.name; }

std::vector<Array> File::arrays() const {
  std::vector<Array> out;
  for (const zip::Entry& entry : archive_.entries()) {
    if (!is_array(entry)) continue;
    // The fixed prefix first (magic, version, header length), then exactly the header.
    const int64_t prefix_bytes = 12;
    std::vector<uint8_t> prefix = archive_.read_prefix(entry, prefix_bytes);
    int64_t header_end = static_cast<int64_t>(prefix.size());
    if (prefix.size() >= 10) {
      const bool long_length = prefix[6] >= 2;
      int64_t length = prefix[8] | prefix[9] << 8;
      if (long_length && prefix.size() >= 12) length |= int64_t{prefix[10]} << 16 | int64_t{prefix[11]} << 24;
      header_end = std::min((long_length ? 12 : 10) + std::min(length, npy::kMaxHeaderBytes + 1), entry.size);
    }
    if (header_end > static_cast<int64_t>(prefix.size())) prefix = archive_.read_prefix(entry, header_end);
    const PrefixSource source(std::move(prefix), entry.size, member_name(entry));
    out.push_back({entry.name.substr(0, entry.name.size() - kSuffix.size()), npy::read_header(source)});
  }
  return out;
}

bool File::contains(const std::string& key) const {
  return archive_.find(key + std::string(kSuffix)) != nullptr;
}

const zip::Entry& File::member(const std::string& key) const {
  const zip::Entry* entry = archive_.find(key + std::string(kSuffix));
  if (entry == nullptr) {
    std::string keys;
    for (const zip::Entry& e : archive_.entries()) {
      if (is_array(e)) keys += (keys.empty() ? "" : ", ") + e.name.substr(0, e.name.size() - kSuffix.size());
    }
    KILN_CHECK(false, "npz: ", archive_.name(), " has no array '", key,
               "' (it has: ", keys.empty() ? "none" : keys, ")");
  }
  return *entry;
}

Tensor File::load(const std::string& key) const {
  // The member inflates straight into the tensor (zip::MemberReader), the CRC-32 summed on
  // the way and checked, with the member's size, once the array is read.
  const zip::Entry& entry = member(key);
  const zip::MemberReader reader(archive_, entry, member_name(entry));
  Tensor tensor = npy::load(reader);
  reader.finish();
  return tensor;
}

std::string to_bytes(const std::vector<std::pair<std::string, Tensor>>& arrays, bool compress) {
  std::vector<std::string> files;
  files.reserve(arrays.size());
  std::vector<zip::NewMember> members;
  for (const auto& [key, tensor] : arrays) {
    const std::string name = key + std::string(kSuffix);
    KILN_CHECK(std::none_of(members.begin(), members.end(), [&name](const zip::NewMember& m) { return m.name == name; }),
               "npz: array '", key, "' given twice");
    files.push_back(npy::to_bytes(tensor));
    members.push_back({name, files.back()});
  }
  return zip::write_archive(members, compress);
}

SaveStatus save(const std::vector<std::pair<std::string, Tensor>>& arrays, const std::string& path,
                bool compress) {
  const std::string bytes = to_bytes(arrays, compress);
  AtomicFile file(path, "npz");
  file.write(bytes);
  return file.commit();
}

}  // namespace kiln::data::npz
