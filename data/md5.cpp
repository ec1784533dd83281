// MD5 (data/md5.h) as RFC 1321 states it: 64-byte blocks of 16 little-endian words, four
// rounds of 16 steps with the per-step constants K[i] = floor(|sin(i + 1)| 2^32) and the
// shift table; the message padded with 0x80, zeros and its bit length.
#include "data/md5.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/byte_source.h"

namespace kiln::data {
namespace {

constexpr int kShift[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                            5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                            4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                            6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

const std::array<uint32_t, 64>& constants() {
  static const std::array<uint32_t, 64> k = [] {
    std::array<uint32_t, 64> table{};
    for (int i = 0; i < 64; ++i)
      table[i] = static_cast<uint32_t>(std::floor(std::fabs(std::sin(i + 1.0)) * 4294967296.0));
    return table;
  }();
  return k;
}

}  // namespace

Md5::Md5() : state_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476} {}

void Md5::block(const uint8_t* chunk) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i) {
    m[i] = uint32_t{chunk[4 * i]} | uint32_t{chunk[4 * i + 1]} << 8 | uint32_t{chunk[4 * i + 2]} << 16 |
           uint32_t{chunk[4 * i + 3]} << 24;
  }
  const std::array<uint32_t, 64>& k = constants();
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  for (int i = 0; i < 64; ++i) {
    uint32_t f = 0;
    int g = 0;
    if (i < 16) {
      f = (b & c) | (~b & d);
      g = i;
    } else if (i < 32) {
      f = (d & b) | (~d & c);
      g = (5 * i + 1) % 16;
    } else if (i < 48) {
      f = b ^ c ^ d;
      g = (3 * i + 5) % 16;
    } else {
      f = c ^ (b | ~d);
      g = (7 * i) % 16;
    }
    f += a + k[i] + m[g];
    a = d;
    d = c;
    c = b;
    b += std::rotl(f, kShift[i]);
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
}

void Md5::update(const void* data, size_t bytes) {
  const auto* in = static_cast<const uint8_t*>(data);
  total_bytes_ += bytes;
  while (bytes > 0) {
    const size_t take = std::min(bytes, pending_.size() - pending_bytes_);
    std::memcpy(pending_.data() + pending_bytes_, in, take);
    pending_bytes_ += take;
    in += take;
    bytes -= take;
    if (pending_bytes_ == pending_.size()) {
      block(pending_.data());
      pending_bytes_ = 0;
    }
  }
}

std::string Md5::hex_digest() {
  const uint64_t bits = total_bytes_ * 8;
  const uint8_t one = 0x80, zero = 0;
  update(&one, 1);
  while (pending_bytes_ != 56) update(&zero, 1);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bits >> (8 * i));
  update(length, 8);
  std::string hex;
  constexpr char kDigits[] = "0123456789abcdef";
  for (uint32_t word : state_) {
    for (int i = 0; i < 4; ++i) {
      const auto byte = static_cast<uint8_t>(word >> (8 * i));
      hex += kDigits[byte >> 4];
      hex += kDigits[byte & 15];
    }
  }
  return hex;
}

std::string md5_of_file(const std::string& path) {
  const FileSource file(path, "md5");
  Md5 md5;
  std::vector<uint8_t> buffer(size_t{1} << 20);
  for (int64_t at = 0; at < file.size();) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(buffer.size()), file.size() - at);
    file.read(at, buffer.data(), n);
    md5.update(buffer.data(), static_cast<size_t>(n));
    at += n;
  }
  return md5.hex_digest();
}

}  // namespace kiln::data
