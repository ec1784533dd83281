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
// CRC-32 mismatch. Output grows with the data actually inflated, never to a size a header
// merely claims. Every violation is a kiln::Error naming the archive (and the member).
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
  void read_directory();
  int64_t data_start(const Entry& entry) const;
  std::vector<uint8_t> extract(const Entry& entry, int64_t limit) const;

  std::unique_ptr<ByteSource> source_;
  std::vector<Entry> entries_;
  int64_t directory_offset_ = 0;
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
