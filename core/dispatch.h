// DType dispatch: turn a runtime DType into a C++ type for a templated lambda.
//
//   visit_dtype(t.dtype(), "relu", kFloatingTypes, [&]<typename T>() { kernel<T>(...); });
//
// The set argument says which dtypes the caller supports; any other dtype is a
// kiln::Error naming the op. Only the types in the set are instantiated, which keeps
// compile times down (STYLE 17): the set is a compile-time template argument.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace kiln {

// A set of dtypes as a bit mask over DType values.
struct DTypeSet {
  uint32_t bits;
  constexpr bool has(DType t) const { return bits & (1u << static_cast<int>(t)); }
  constexpr DTypeSet operator|(DTypeSet o) const { return {bits | o.bits}; }
  constexpr bool operator==(const DTypeSet&) const = default;
};

constexpr DTypeSet dtype_set(DType t) { return {1u << static_cast<int>(t)}; }

inline constexpr DTypeSet kFloatingTypes = dtype_set(DType::Float32) | dtype_set(DType::Float64) |
                                           dtype_set(DType::Float16) | dtype_set(DType::BFloat16);
inline constexpr DTypeSet kIntegralTypes =
    dtype_set(DType::Int64) | dtype_set(DType::Int32) | dtype_set(DType::UInt8);
inline constexpr DTypeSet kNumericTypes = kFloatingTypes | kIntegralTypes;
inline constexpr DTypeSet kAllTypes = kNumericTypes | dtype_set(DType::Bool);

[[noreturn]] void throw_unsupported_dtype(const char* op, DType dtype);

template <DTypeSet kSet, typename F>
decltype(auto) visit_dtype(DType dtype, const char* op, F&& f) {
#define KILN_VISIT_CASE(Enum, Type)                                           \
  case DType::Enum:                                                          \
    if constexpr (kSet.has(DType::Enum)) return f.template operator()<Type>(); \
    break;
  switch (dtype) {
    KILN_VISIT_CASE(Float32, float)
    KILN_VISIT_CASE(Float64, double)
    KILN_VISIT_CASE(Float16, Half)
    KILN_VISIT_CASE(BFloat16, BFloat16)
    KILN_VISIT_CASE(Int64, int64_t)
    KILN_VISIT_CASE(Int32, int32_t)
    KILN_VISIT_CASE(UInt8, uint8_t)
    KILN_VISIT_CASE(Bool, bool)
  }
#undef KILN_VISIT_CASE
  throw_unsupported_dtype(op, dtype);
}

}  // namespace kiln
