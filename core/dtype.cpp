// DType names, sizes and the type-promotion rules of Note [Type promotion] (dtype.h).
#include "core/dtype.h"

#include <optional>

#include "core/error.h"

namespace kiln {

size_t itemsize_of_unknown(DType dtype) {
  KILN_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
  __builtin_unreachable();
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::UInt8: return "uint8";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

namespace {

int category(DType t) { return t == DType::Bool ? 0 : is_integral(t, false) ? 1 : 2; }

// Rank of a type within its category; a larger rank holds every value of a smaller one.
int rank_in_category(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::UInt8: return 0;
    case DType::Int32: return 1;
    case DType::Int64: return 2;
    case DType::Float16: case DType::BFloat16: return 0;
    case DType::Float32: return 1;
    case DType::Float64: return 2;
  }
  return 0;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return rank_in_category(a) >= rank_in_category(b) ? a : b;
}

namespace {

// Combines the dtype of a higher priority class with a lower one (absent = nullopt): the
// higher wins, except that a lower class of a higher category (a float below an int, or
// anything below bool) promotes with it.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower || is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType result_type(std::initializer_list<PromotionOperand> operands) {
  using Kind = PromotionOperand::Kind;
  std::optional<DType> by_kind[3];  // Dimensioned, ZeroDim, WrappedNumber
  for (const PromotionOperand& op : operands) {
    DType t = op.dtype;
    // A wrapped C++ number only says its category: floats count as the default float,
    // integers as int64.
    if (op.kind == Kind::WrappedNumber && is_floating(t)) t = kDefaultFloat;
    if (op.kind == Kind::WrappedNumber && is_integral(t, false)) t = DType::Int64;
    auto& slot = by_kind[static_cast<int>(op.kind)];
    slot = slot ? promote_types(*slot, t) : t;
  }
  const std::optional<DType> result =
      combine_categories(by_kind[0], combine_categories(by_kind[1], by_kind[2]));
  KILN_ASSERT(result.has_value(), "result_type of no operands");
  return *result;
}

}  // namespace kiln
