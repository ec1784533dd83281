// DType: the element types a Tensor can hold, their C++ types, and type promotion.
//
// Note [Type promotion] (PyTorch's rules, implemented once, in dtype.cpp):
//   Categories order bool < integer < floating. promote_types(a, b) is the smallest type
//   that holds both: uint8+int32 -> int32, float16+bfloat16 -> float32, int+float -> the
//   float. result_type() over an op's operands ranks them in three priorities:
//   dimensioned tensors > zero-dim tensors > plain C++ numbers ("wrapped scalars").
//   The highest priority present decides the dtype, unless a lower priority holds a
//   higher category: int tensor * 2.5 -> float32 (the default float), but
//   float16 tensor * 2.5 -> float16 and float32 tensor + float64 zero-dim -> float32.
//
// Note [Opmath]: kernels compute Float16/BFloat16 in float32 and round on store; the
// accumulation type of reductions is wider still (see kernels).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "core/half.h"

namespace kiln {

enum class DType : uint8_t { Float32, Float64, Float16, BFloat16, Int64, Int32, UInt8, Bool };

inline constexpr int kNumDTypes = 8;

// Throws the internal error for a DType value outside the enum (a Kiln bug).
[[noreturn]] size_t itemsize_of_unknown(DType dtype);
// Bytes per element. Inline: every tensor's allocation, view check and kernel launch asks.
inline size_t itemsize(DType dtype) {
  switch (dtype) {
    case DType::Float64: case DType::Int64: return 8;
    case DType::Float32: case DType::Int32: return 4;
    case DType::Float16: case DType::BFloat16: return 2;
    case DType::UInt8: case DType::Bool: return 1;
  }
  return itemsize_of_unknown(dtype);
}
std::string_view dtype_name(DType dtype);  // "float32", ... as PyTorch prints them
std::ostream& operator<<(std::ostream& os, DType dtype);

constexpr bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}
constexpr bool is_integral(DType t, bool include_bool) {
  return t == DType::Int64 || t == DType::Int32 || t == DType::UInt8 ||
         (include_bool && t == DType::Bool);
}

// Whether a result of dtype `from` may be written into a tensor of dtype `to` (an in-place
// op, copy into an output): never down a category, floating into an integer or anything
// but Bool into Bool. PyTorch's torch.can_cast.
constexpr bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return from == DType::Bool || to != DType::Bool;
}

// Default dtype of floating factories and of int-tensor-times-float-scalar.
inline constexpr DType kDefaultFloat = DType::Float32;

DType promote_types(DType a, DType b);

// One operand of result_type(): a tensor's dtype and rank, or a wrapped C++ number.
struct PromotionOperand {
  DType dtype;
  enum class Kind { Dimensioned, ZeroDim, WrappedNumber } kind;
};
DType result_type(std::initializer_list<PromotionOperand> operands);

// ---- C++ type <-> DType ---------------------------------------------------------------

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Note [Opmath]: the type arithmetic on T is done in.
template <typename T> struct opmath { using type = T; };
template <> struct opmath<Half> { using type = float; };
template <> struct opmath<BFloat16> { using type = float; };
template <typename T> using opmath_t = typename opmath<T>::type;

template <typename T>
inline constexpr bool is_floating_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

}  // namespace kiln
