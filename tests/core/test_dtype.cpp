// DType basics and Note [Type promotion] (core/dtype.h): sizes and names of every dtype,
// the can_cast and promote_types tables written out by hand from PyTorch's rules,
// result_type's three priority classes (dimensioned > zero-dim > wrapped number), and the
// same rules seen through real ops (the dtype an op's result actually has).
#include <gtest/gtest.h>

#include <iterator>
#include <sstream>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using Kind = PromotionOperand::Kind;

constexpr DType kAll[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                          DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

TEST(DType, ItemsizeOfEveryDType) {
  EXPECT_EQ(itemsize(DType::Float32), 4u);
  EXPECT_EQ(itemsize(DType::Float64), 8u);
  EXPECT_EQ(itemsize(DType::Float16), 2u);
  EXPECT_EQ(itemsize(DType::BFloat16), 2u);
  EXPECT_EQ(itemsize(DType::Int64), 8u);
  EXPECT_EQ(itemsize(DType::Int32), 4u);
  EXPECT_EQ(itemsize(DType::UInt8), 1u);
  EXPECT_EQ(itemsize(DType::Bool), 1u);
}

TEST(DType, ItemsizeMatchesTheHostType) {
  EXPECT_EQ(itemsize(dtype_of_v<float>), sizeof(float));
  EXPECT_EQ(itemsize(dtype_of_v<double>), sizeof(double));
  EXPECT_EQ(itemsize(dtype_of_v<Half>), sizeof(Half));
  EXPECT_EQ(itemsize(dtype_of_v<BFloat16>), sizeof(BFloat16));
  EXPECT_EQ(itemsize(dtype_of_v<int64_t>), sizeof(int64_t));
  EXPECT_EQ(itemsize(dtype_of_v<int32_t>), sizeof(int32_t));
  EXPECT_EQ(itemsize(dtype_of_v<uint8_t>), sizeof(uint8_t));
  EXPECT_EQ(itemsize(dtype_of_v<bool>), sizeof(bool));
}

TEST(DType, NamesAsPyTorchPrintsThem) {
  EXPECT_EQ(dtype_name(DType::Float32), "float32");
  EXPECT_EQ(dtype_name(DType::Float64), "float64");
  EXPECT_EQ(dtype_name(DType::Float16), "float16");
  EXPECT_EQ(dtype_name(DType::BFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(DType::Int64), "int64");
  EXPECT_EQ(dtype_name(DType::Int32), "int32");
  EXPECT_EQ(dtype_name(DType::UInt8), "uint8");
  EXPECT_EQ(dtype_name(DType::Bool), "bool");
  std::ostringstream os;
  os << DType::BFloat16;
  EXPECT_EQ(os.str(), "bfloat16");
}

TEST(DType, Categories) {
  for (DType t : kAll) {
    const bool floating = t == DType::Float32 || t == DType::Float64 || t == DType::Float16 ||
                          t == DType::BFloat16;
    EXPECT_EQ(is_floating(t), floating) << t;
    EXPECT_EQ(is_integral(t, /*include_bool=*/false), !floating && t != DType::Bool) << t;
    EXPECT_EQ(is_integral(t, /*include_bool=*/true), !floating) << t;
  }
}

// torch.can_cast over Kiln's dtypes, by hand in the order of kAll (f32 f64 f16 bf16 i64 i32
// u8 b): row = from, column = to. Floating casts only to floating, anything but Bool not to
// Bool; within a category, and up one, every cast is allowed (precision is not checked).
TEST(DType, CanCastTable) {
  const bool kTable[8][8] = {
      {1, 1, 1, 1, 0, 0, 0, 0},  // float32
      {1, 1, 1, 1, 0, 0, 0, 0},  // float64
      {1, 1, 1, 1, 0, 0, 0, 0},  // float16
      {1, 1, 1, 1, 0, 0, 0, 0},  // bfloat16
      {1, 1, 1, 1, 1, 1, 1, 0},  // int64
      {1, 1, 1, 1, 1, 1, 1, 0},  // int32
      {1, 1, 1, 1, 1, 1, 1, 0},  // uint8
      {1, 1, 1, 1, 1, 1, 1, 1},  // bool
  };
  for (size_t from = 0; from < std::size(kAll); ++from) {
    for (size_t to = 0; to < std::size(kAll); ++to) {
      EXPECT_EQ(can_cast(kAll[from], kAll[to]), kTable[from][to]) << kAll[from] << " -> " << kAll[to];
    }
  }
}

// The whole table, by hand, in the order of kAll (f32 f64 f16 bf16 i64 i32 u8 b).
// Rows and columns are written independently of the implementation's category/rank
// scheme: this is PyTorch's promote_types restricted to Kiln's eight dtypes.
TEST(DType, PromoteTypesFullTable) {
  constexpr DType f32 = DType::Float32, f64 = DType::Float64, f16 = DType::Float16, bf16 = DType::BFloat16,
                  i64 = DType::Int64, i32 = DType::Int32, u8 = DType::UInt8, b = DType::Bool;
  const DType table[8][8] = {
      //          f32  f64  f16   bf16  i64  i32  u8    b
      /* f32 */ {f32, f64, f32, f32, f32, f32, f32, f32},
      /* f64 */ {f64, f64, f64, f64, f64, f64, f64, f64},
      /* f16 */ {f32, f64, f16, f32, f16, f16, f16, f16},
      /* bf16*/ {f32, f64, f32, bf16, bf16, bf16, bf16, bf16},
      /* i64 */ {f32, f64, f16, bf16, i64, i64, i64, i64},
      /* i32 */ {f32, f64, f16, bf16, i64, i32, i32, i32},
      /* u8  */ {f32, f64, f16, bf16, i64, i32, u8, u8},
      /* b   */ {f32, f64, f16, bf16, i64, i32, u8, b},
  };
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(promote_types(kAll[i], kAll[j]), table[i][j]) << kAll[i] << " + " << kAll[j];
    }
  }
}

TEST(DType, PromoteTypesNamedCases) {
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote_types(DType::BFloat16, DType::Float16), DType::Float32);
  EXPECT_EQ(promote_types(DType::Bool, DType::UInt8), DType::UInt8);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float16), DType::Float16);
  EXPECT_EQ(promote_types(DType::Int32, DType::Float32), DType::Float32);
}

DType rt(std::initializer_list<PromotionOperand> ops) { return result_type(ops); }

TEST(DType, ResultTypeCasesOfTheNote) {
  const auto dim = [](DType t) { return PromotionOperand{t, Kind::Dimensioned}; };
  const auto zero = [](DType t) { return PromotionOperand{t, Kind::ZeroDim}; };
  const auto wrapped = [](DType t) { return PromotionOperand{t, Kind::WrappedNumber}; };
  // A wrapped float only says "floating": the default float32, or the tensor's float.
  EXPECT_EQ(rt({dim(DType::Int32), wrapped(DType::Float64)}), DType::Float32);
  EXPECT_EQ(rt({dim(DType::Float16), wrapped(DType::Float64)}), DType::Float16);
  EXPECT_EQ(rt({dim(DType::BFloat16), wrapped(DType::Float64)}), DType::BFloat16);
  EXPECT_EQ(rt({dim(DType::Float64), wrapped(DType::Float64)}), DType::Float64);
  // A zero-dim tensor of a higher category keeps its own dtype.
  EXPECT_EQ(rt({dim(DType::Int32), zero(DType::Float64)}), DType::Float64);
  EXPECT_EQ(rt({dim(DType::UInt8), zero(DType::Float16)}), DType::Float16);
  // ...but of the same category it does not widen the dimensioned tensor.
  EXPECT_EQ(rt({dim(DType::Float32), zero(DType::Float64)}), DType::Float32);
  EXPECT_EQ(rt({dim(DType::UInt8), zero(DType::Int64)}), DType::UInt8);
  EXPECT_EQ(rt({dim(DType::Int32), zero(DType::Int64)}), DType::Int32);
  // Wrapped integers: int64 against bool, nothing against an integer tensor.
  EXPECT_EQ(rt({dim(DType::Bool), wrapped(DType::Int64)}), DType::Int64);
  EXPECT_EQ(rt({dim(DType::Int32), wrapped(DType::Int64)}), DType::Int32);
  EXPECT_EQ(rt({dim(DType::UInt8), wrapped(DType::Int64)}), DType::UInt8);
  EXPECT_EQ(rt({dim(DType::Bool), wrapped(DType::Bool)}), DType::Bool);
  EXPECT_EQ(rt({dim(DType::Bool), wrapped(DType::Float64)}), DType::Float32);
  // Dimensioned tensors promote among themselves as promote_types.
  EXPECT_EQ(rt({dim(DType::Int64), dim(DType::Float32)}), DType::Float32);
  EXPECT_EQ(rt({dim(DType::Bool), dim(DType::UInt8)}), DType::UInt8);
  // Only zero-dim / wrapped operands: the same rules one priority down.
  EXPECT_EQ(rt({zero(DType::Int32), wrapped(DType::Float64)}), DType::Float32);
  EXPECT_EQ(rt({zero(DType::Float64), wrapped(DType::Float64)}), DType::Float64);
  EXPECT_EQ(rt({wrapped(DType::Int64), wrapped(DType::Int64)}), DType::Int64);
  EXPECT_EQ(rt({wrapped(DType::Float64)}), DType::Float32);
  // Three priorities at once: the int zero-dim does not widen the int32 tensor, the
  // wrapped float makes it floating.
  EXPECT_EQ(rt({dim(DType::Int32), zero(DType::Int64), wrapped(DType::Float64)}), DType::Float32);
  EXPECT_EQ(rt({dim(DType::Int32), zero(DType::Float64), wrapped(DType::Float64)}), DType::Float64);
}

// The same rules through the ops users call.
TEST(DType, PromotionThroughOps) {
  const Tensor i32 = ones({3}, {.dtype = DType::Int32});
  const Tensor u8 = ones({3}, {.dtype = DType::UInt8});
  const Tensor f16 = ones({3}, {.dtype = DType::Float16});
  const Tensor f32 = ones({3}, {.dtype = DType::Float32});
  const Tensor bf16 = ones({3}, {.dtype = DType::BFloat16});
  const Tensor b = ones({3}, {.dtype = DType::Bool});

  const Tensor product = mul(i32, 2.5);
  EXPECT_EQ(product.dtype(), DType::Float32);
  EXPECT_EQ(product.to_vector<float>(), std::vector<float>(3, 2.5f));
  EXPECT_EQ(mul(f16, 2.5).dtype(), DType::Float16);
  EXPECT_EQ(add(i32, 2).dtype(), DType::Int32);
  EXPECT_EQ(add(b, 2).dtype(), DType::Int64);
  EXPECT_EQ(add(b, 2).to_vector<int64_t>(), std::vector<int64_t>(3, 3));
  EXPECT_EQ(add(i32, scalar_tensor(1.5, {.dtype = DType::Float64})).dtype(), DType::Float64);
  EXPECT_EQ(add(f32, scalar_tensor(1.5, {.dtype = DType::Float64})).dtype(), DType::Float32);
  EXPECT_EQ(add(u8, scalar_tensor(7, {.dtype = DType::Int64})).dtype(), DType::UInt8);
  EXPECT_EQ(add(u8, i32).dtype(), DType::Int32);
  EXPECT_EQ(add(f16, bf16).dtype(), DType::Float32);
  EXPECT_EQ(add(b, u8).dtype(), DType::UInt8);
  EXPECT_EQ(add(i32, f16).dtype(), DType::Float16);
  // A zero-dim tensor alone against a wrapped number.
  EXPECT_EQ(mul(scalar_tensor(3, {.dtype = DType::Int32}), 0.5).dtype(), DType::Float32);
}

}  // namespace
}  // namespace kiln
