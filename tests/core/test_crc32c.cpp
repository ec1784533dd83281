// CRC-32C (core/crc32c.h): the published test vectors (RFC 3720 B.4, the "123456789"
// check value) through crc32c() and through each of its two paths; the SSE4.2 path equal
// to the table on random buffers of every length up to 80 bytes at every alignment (its
// head, 8-byte body and tail), and on a megabyte; and a CRC extended piece by piece equal
// to the CRC of the whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/crc32c.h"

namespace kiln {
namespace {

using Crc = uint32_t (*)(const void*, size_t, uint32_t);

void expect_published_vectors(Crc crc) {
  EXPECT_EQ(crc("123456789", 9, 0), 0xE3069283u);
  EXPECT_EQ(crc("", 0, 0), 0u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc(zeros.data(), 32, 0), 0x8A9136AAu);  // RFC 3720, B.4
  EXPECT_EQ(crc(ones.data(), 32, 0), 0x62A8AB43u);
  EXPECT_EQ(crc(ascending.data(), 32, 0), 0x46DD794Eu);
  EXPECT_EQ(crc(descending.data(), 32, 0), 0x113FDB5Cu);
  // Extending a CRC equals the CRC of the concatenation.
  EXPECT_EQ(crc("6789", 4, crc("12345", 5, 0)), 0xE3069283u);
}

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<unsigned char> bytes(n);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(generator());
  return bytes;
}

TEST(Crc32c, PublishedTestVectors) {
  expect_published_vectors([](const void* d, size_t n, uint32_t c) { return crc32c(d, n, c); });
  expect_published_vectors(crc32c_by_table);
  if (crc32c_has_instruction()) expect_published_vectors(crc32c_by_instruction);
}

TEST(Crc32c, TheInstructionEqualsTheTableAtEveryLengthAndAlignment) {
  if (!crc32c_has_instruction()) GTEST_SKIP() << "this CPU has no SSE4.2 crc32 instruction; crc32c() uses the table";
  const std::vector<unsigned char> bytes = random_bytes(96, 7);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; n + offset <= 88; ++n) {
      SCOPED_TRACE("offset " + std::to_string(offset) + ", " + std::to_string(n) + " bytes");
      ASSERT_EQ(crc32c_by_instruction(bytes.data() + offset, n, 0), crc32c_by_table(bytes.data() + offset, n, 0));
      ASSERT_EQ(crc32c_by_instruction(bytes.data() + offset, n, 0x12345678u),
                crc32c_by_table(bytes.data() + offset, n, 0x12345678u));
    }
  }
  const std::vector<unsigned char> megabyte = random_bytes(1 << 20, 8);
  EXPECT_EQ(crc32c_by_instruction(megabyte.data(), megabyte.size()), crc32c_by_table(megabyte.data(), megabyte.size()));
}

TEST(Crc32c, ExtendingPieceByPieceEqualsTheWhole) {
  const std::vector<unsigned char> bytes = random_bytes(1000, 9);
  const uint32_t whole = crc32c(bytes.data(), bytes.size());
  uint32_t pieces = 0;
  for (size_t at = 0, size = 1; at < bytes.size(); at += size, size = size * 2 + 1)
    pieces = crc32c(bytes.data() + at, std::min(size, bytes.size() - at), pieces);
  EXPECT_EQ(pieces, whole);
  EXPECT_NE(whole, 0u);
}

}  // namespace
}  // namespace kiln
