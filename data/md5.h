// MD5 (RFC 1321), for checking downloaded and found dataset files against the digests
// their publishers list (MedMNIST's info.py gives an MD5 per file). A checksum for
// telling a truncated or altered download from the real file, not for security.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::data {

class Md5 {
 public:
  Md5();
  void update(const void* data, size_t bytes);
  // The digest as 32 lowercase hex digits; the object is then spent.
  std::string hex_digest();

 private:
  void block(const uint8_t* chunk);
  std::array<uint32_t, 4> state_;
  std::array<uint8_t, 64> pending_{};
  size_t pending_bytes_ = 0;
  uint64_t total_bytes_ = 0;
};

// The MD5 of a file's bytes, read in 1 MiB pieces.
std::string md5_of_file(const std::string& path);

}  // namespace kiln::data
