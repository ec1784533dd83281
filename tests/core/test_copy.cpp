// The copies of core/ops/copy.h: to() between every pair of dtypes (truncation, bool as
// non-zero, rounding into the 16-bit types, uint8 wrap-around), to() returning the same
// tensor when nothing changes, clone's independence, contiguous copying only when needed,
// and a gradient check for to, clone, contiguous and copy_. pin_memory needs CUDA: it is
// tested in tests/cuda/test_cuda_runtime.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::gradcheck;
using testing::uniform_leaf;
using Inputs = std::vector<Tensor>;

constexpr DType kAllDTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

// Floating -> uint8 truncates toward zero and wraps modulo 256 (through int64, as PyTorch),
// on every platform (kernels/copy_cast.h); the CUDA copy gives the same bytes.
TEST(Tensor, FloatingToUInt8WrapsOnEveryPlatform) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const Tensor values = full({3}, -1.5, {.dtype = dtype});
    values.select(0, 1).fill_(300.0);
    values.select(0, 2).fill_(-0.5);
    const Tensor bytes = values.to(DType::UInt8);
    EXPECT_EQ(bytes.select(0, 0).item<int64_t>(), 255) << dtype;
    EXPECT_EQ(bytes.select(0, 1).item<int64_t>(), 44) << dtype;
    EXPECT_EQ(bytes.select(0, 2).item<int64_t>(), 0) << dtype;
  }
}

// Small non-negative integers are exact in every dtype, so every pair converts exactly.
TEST(Tensor, ToConvertsBetweenEveryPairOfDTypes) {
  const std::vector<double> values = {0, 1, 2, 3, 100, 7};
  for (DType from : kAllDTypes) {
    const std::vector<double> in = from == DType::Bool ? std::vector<double>{0, 1, 1, 0, 1, 1} : values;
    const Tensor src = tensor<double>(in, {2, 3}).to(from);
    for (DType to_dtype : kAllDTypes) {
      const Tensor out = src.to(to_dtype);
      EXPECT_EQ(out.dtype(), to_dtype);
      EXPECT_EQ(out.sizes(), src.sizes());
      std::vector<double> expected = in;
      if (to_dtype == DType::Bool) for (double& e : expected) e = e != 0;
      EXPECT_EQ(out.to_vector<double>(), expected) << from << " -> " << to_dtype;
      // And through a non-contiguous view.
      EXPECT_EQ(src.t().to(to_dtype).to_vector<double>(), src.t().to(DType::Float64).to(to_dtype).to_vector<double>())
          << from << " -> " << to_dtype << " (transposed)";
    }
  }
}

TEST(Tensor, ToTruncatesFloatsAndTestsNonZeroForBool) {
  const Tensor x = tensor<double>({-2.7, -0.5, 0.0, 0.5, 2.9, 1e3});
  EXPECT_EQ(x.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 0, 0, 0, 2, 1000}));
  EXPECT_EQ(x.to(DType::Int32).to_vector<int32_t>(), (std::vector<int32_t>{-2, 0, 0, 0, 2, 1000}));
  EXPECT_EQ(x.to(DType::Float16).to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 0, 0, 0, 2, 1000}));
  const Tensor y = tensor<float>({0.0f, -0.0f, 0.25f, -3.0f, std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity()});
  EXPECT_EQ(y.to(DType::Bool).to_vector<bool>(), (std::vector<bool>{false, false, true, true, true, true}));
  EXPECT_EQ(tensor<int64_t>({0, -5, 3}).to(DType::Bool).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  // Rounding into the 16-bit types is to nearest.
  EXPECT_EQ(tensor<float>({0.1f}).to(DType::Float16).item<float>(), static_cast<float>(Half(0.1f)));
  EXPECT_EQ(tensor<float>({0.1f}).to(DType::BFloat16).item<float>(), static_cast<float>(BFloat16(0.1f)));
  EXPECT_EQ(tensor<float>({1e5f}).to(DType::Float16).item<float>(), std::numeric_limits<float>::infinity());
  // Large integers keep their bits through int64 <-> float64 where they fit.
  EXPECT_EQ(tensor<int64_t>({int64_t{1} << 52}).to(DType::Float64).item<double>(), std::ldexp(1.0, 52));
}

TEST(Tensor, ToTheSameDTypeReturnsTheSameTensor) {
  const Tensor x = ones({3});
  EXPECT_TRUE(x.to(DType::Float32).is_same(x));
  EXPECT_TRUE(x.to(Device::cpu()).is_same(x));
  EXPECT_FALSE(x.to(Device::cpu(), DType::Float32, false, /*copy=*/true).is_same(x));
}

TEST(Tensor, CloneIsIndependent) {
  Tensor x = tensor<float>({1, 2, 3, 4}, {2, 2});
  Tensor c = x.clone();
  EXPECT_FALSE(c.storage().is_alias_of(x.storage()));
  c.fill_(9);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  x.zero_();
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(4, 9));
  const Tensor ct = tensor<float>({1, 2, 3, 4}, {2, 2}).t().clone();
  EXPECT_EQ(ct.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
}

TEST(Tensor, ContiguousCopiesOnlyWhenNeeded) {
  const Tensor x = arange(6).view({2, 3});
  EXPECT_TRUE(x.contiguous().is_same(x));
  const Tensor xt = x.t();
  EXPECT_FALSE(xt.is_contiguous());
  const Tensor c = xt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.storage().is_alias_of(x.storage()));
  EXPECT_EQ(c.strides(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
}

// ---- gradient checks ------------------------------------------------------------------------

KILN_GRADCHECK_TEST(to) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mul(v[0].to(DType::Float32), 2.0).to(DType::Float64); },
                        {uniform_leaf({3}, 1)}, {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-4}));
}

KILN_GRADCHECK_TEST(clone) { EXPECT_TRUE(gradcheck([](const Inputs& v) { return clone(v[0]); }, {testing::strided_grad_leaf({3, 2}, 1)})); }

KILN_GRADCHECK_TEST(contiguous) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return contiguous(v[0]); }, {testing::strided_grad_leaf({3, 2}, 1)}));
}

KILN_GRADCHECK_TEST(copy_) {
  // dest = a * 1 (a non-leaf), then dest.copy_(b broadcast): d/da = 0, d/db = summed g.
  EXPECT_TRUE(gradcheck(
      [](const Inputs& v) {
        Tensor dest = mul(v[0], 1.0);
        dest.copy_(v[1]);
        return mul(dest, dest);
      },
      {uniform_leaf({3, 4}, 1), uniform_leaf({4}, 2)}));
}

}  // namespace
}  // namespace kiln
