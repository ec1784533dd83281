// The safetensors dtype table: codes, element sizes, the Kiln dtypes they map to, and the
// writer's ordering rank (core/safetensors_format.h).
#include "core/safetensors_format.h"

#include <array>

#include "core/error.h"
#include "core/safetensors.h"

namespace kiln::safetensors {
namespace {

struct FormatDType {
  std::string_view code;
  int64_t item_size;
};

// Every whole-byte dtype of the format, in the Rust crate's enum order.
constexpr std::array<FormatDType, 16> kFormatDTypes{{
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4},
    {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
}};

// The eight Kiln dtypes, with their codes and alignment ranks (ascending).
struct KilnDType {
  DType dtype;
  std::string_view code;
};
constexpr std::array<KilnDType, kNumDTypes> kKilnDTypes{{
    {DType::Bool, "BOOL"}, {DType::UInt8, "U8"}, {DType::Float16, "F16"},
    {DType::BFloat16, "BF16"}, {DType::Int32, "I32"}, {DType::Float32, "F32"},
    {DType::Float64, "F64"}, {DType::Int64, "I64"},
}};

}  // namespace

std::optional<int64_t> format_item_size(std::string_view code) {
  for (const FormatDType& entry : kFormatDTypes) {
    if (entry.code == code) return entry.item_size;
  }
  return std::nullopt;
}

int alignment_rank(DType dtype) {
  for (size_t i = 0; i < kKilnDTypes.size(); ++i) {
    if (kKilnDTypes[i].dtype == dtype) return static_cast<int>(i);
  }
  KILN_ASSERT(false, "safetensors: no rank for dtype ", dtype);
  return 0;
}

std::optional<DType> to_kiln_dtype(std::string_view code) {
  for (const KilnDType& entry : kKilnDTypes) {
    if (entry.code == code) return entry.dtype;
  }
  return std::nullopt;
}

std::string_view dtype_code(DType dtype) {
  for (const KilnDType& entry : kKilnDTypes) {
    if (entry.dtype == dtype) return entry.code;
  }
  KILN_ASSERT(false, "safetensors: no code for dtype ", dtype);
  return {};
}

}  // namespace kiln::safetensors
