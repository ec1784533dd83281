// The safetensors format's constants and dtype table, shared by the reader
// (core/safetensors.cpp) and the writer (core/safetensors_write.cpp). Internal to core.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"

namespace kiln::safetensors {

// Python's reader refuses headers longer than this (MAX_HEADER_SIZE in the Rust crate).
inline constexpr int64_t kMaxHeaderBytes = 100'000'000;
// The header key that holds the string -> string metadata instead of a tensor.
inline constexpr std::string_view kMetadataKey = "__metadata__";

// Bytes per element of a safetensors dtype code, for every whole-byte code the format
// defines ("F32", "I8", "F8_E4M3", ...); nullopt for an unknown code.
std::optional<int64_t> format_item_size(std::string_view code);

// Note [safetensors write order]: the rank of a Kiln dtype in the Rust crate's Dtype enum
// (BOOL < U8 < F16 < BF16 < I32 < F32 < F64 < I64); the writer puts higher ranks first.
int alignment_rank(DType dtype);

}  // namespace kiln::safetensors
