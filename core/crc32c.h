// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78): the checksum of
// TFRecord files (TensorBoard's event files, train/tensorboard.h) and of every tensor in a
// safetensors file Kiln writes (Note [Tensor checksums] in core/safetensors.h).
//
// crc32c() takes the SSE4.2 crc32 instruction, 8 bytes at a time, on an x86-64 CPU that has
// it (checked once, at first use) and a byte-at-a-time table everywhere else; both give
// the same value (tests/core/test_crc32c.cpp compares them). masked_crc32c is the form
// TFRecord stores, so that a CRC of data containing CRCs is not degenerate:
//   masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
//
//   crc32c("123456789", 9) == 0xE3069283
//   crc32c("6789", 4, crc32c("12345", 5)) == 0xE3069283   (extending a CRC)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

// Extends `crc` (0 to start) over n bytes.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t n);
// As 8 lowercase hex digits ("e3069283"), the way files and messages write one.
std::string crc32c_hex(uint32_t crc);

// The two ways crc32c() may compute it, for the tests: the table, and the instruction
// (which must only be called where crc32c_has_instruction()).
uint32_t crc32c_by_table(const void* data, size_t n, uint32_t crc = 0);
uint32_t crc32c_by_instruction(const void* data, size_t n, uint32_t crc = 0);
bool crc32c_has_instruction();

}  // namespace kiln
