// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), the checksum of
// TFRecord files (TensorBoard's event files, tensorboard.h), and its "masked" form, which
// TFRecord stores so that a CRC of data containing CRCs is not degenerate:
//   masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
// A byte-at-a-time table; event files are small.
//
//   crc32c("123456789", 9) == 0xE3069283
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::train {

// Extends `crc` (0 to start) over n bytes.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t n);

}  // namespace kiln::train
