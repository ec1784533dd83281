// The TF32 switch (Note [TF32] in core/flags.h) changes the compute type of float32
// GEMMs: with it on, a float32 product of full-mantissa inputs differs from the float32
// result by more than float32 rounding, yet stays within TF32's error. Needs a GPU with
// TF32 tensor cores (compute capability 8.0 or later); skips otherwise. In internal/
// because it asks the CUDA runtime for the compute capability.
#include <gtest/gtest.h>

#include <cmath>

#include "core/flags.h"
#include "core/ops.h"
#include "kernels/cuda/runtime.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

Tensor product_on_cuda(const Tensor& a, const Tensor& b, bool allow_tf32) {
  const kiln::testing::ScopedFlag guard(set_allow_tf32_matmul, allow_tf32_matmul, allow_tf32);
  return bmm(a.to(testing::kCuda), b.to(testing::kCuda)).cpu();
}

double max_abs_difference(const Tensor& x, const Tensor& y) {
  return sub(x.to(DType::Float64), y.to(DType::Float64)).abs().max().item<double>();
}

TEST(CudaMatmulTf32, TheFlagSwitchesFloat32ProductsToTf32) {
  KILN_REQUIRE_CUDA();
  if (cuda::device_properties(0).major < 8) GTEST_SKIP() << "TF32 needs compute capability 8.0 or later";
  const int64_t k = 512;
  const Tensor a = testing::random_nonzero({2, 64, k}, DType::Float32, 1);
  const Tensor b = testing::random_nonzero({2, k, 48}, DType::Float32, 2);
  const Tensor exact = bmm(a.to(DType::Float64), b.to(DType::Float64));
  const Tensor fp32 = product_on_cuda(a, b, /*allow_tf32=*/false);
  const Tensor tf32 = product_on_cuda(a, b, /*allow_tf32=*/true);
  EXPECT_FALSE(allow_tf32_matmul());
  const double fp32_error = max_abs_difference(fp32, exact);
  const double tf32_error = max_abs_difference(tf32, exact);
  // float32: K roundings of about 6e-8 relative each; TF32: inputs rounded to ~5e-4.
  EXPECT_LT(fp32_error, 1e-6 * static_cast<double>(k));
  EXPECT_GT(max_abs_difference(tf32, fp32), 10.0 * fp32_error);
  EXPECT_LT(tf32_error, 4e-3 * std::sqrt(static_cast<double>(k)) * 3.0);
}

}  // namespace
}  // namespace kiln
