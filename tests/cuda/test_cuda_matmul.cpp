// CUDA bmm (cuBLAS for floating dtypes, the tiled kernel for integers) against the CPU
// backend: every dtype, odd M/N/K, K = 0 and empty shapes, a broadcast batch, every
// transpose combination, sliced operands that need the copy path, strided and transposed
// outputs (poisoned, gaps checked), the public matmul/linear ops and their gradients,
// TF32's tolerance and the flag's default. Skips without a GPU (but for the default).
//
// Tolerances (gemm_tolerance): both backends get identical inputs, so floating results
// differ only by the order of the float32 (float64) sums and, for float16/bfloat16, by
// one rounding of the output when the two sums straddle a rounding boundary. The first
// grows with K (|sum| ~ sqrt(K) for random signs, error ~ K u_acc at worst), so atol is
// scaled by K; the second is one unit in the last place, covered by the dtype's rtol.
// Integer products are exact (wrap-around arithmetic is order-independent).
#include <gtest/gtest.h>

#include <cmath>

#include "core/backend.h"
#include "core/flags.h"
#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::gaps_untouched;
using testing::kCuda;
using testing::on_device;
using testing::poisoned;
using testing::poisoned_strided;
using testing::random_for;
using testing::Tolerance;

struct GemmShape {
  int64_t batch, m, k, n;
};

// Odd sizes on every axis, single rows/columns, and sizes past one 16/32/64 tile.
const std::vector<GemmShape> kGemmShapes = {{1, 1, 1, 1},   {1, 7, 33, 129}, {3, 129, 7, 33},
                                            {2, 33, 129, 1}, {4, 1, 129, 7}, {2, 65, 64, 31}};

Tolerance gemm_tolerance(DType dtype, int64_t k) {
  const double kk = static_cast<double>(std::max<int64_t>(k, 1));
  Tolerance tol = testing::tolerance_for(dtype);
  if (dtype == DType::Float64) {
    tol.atol = 1e-14 * kk;
  } else if (is_floating(dtype)) {
    tol.atol += 1e-6 * kk;  // float32 accumulation order
  }
  return tol;
}

// TF32 rounds each input to 10 mantissa bits: each product is off by up to ~2^-10
// relative, and K such errors of random sign add up like sqrt(K).
Tolerance tf32_tolerance(int64_t k) { return {4e-3 * std::sqrt(static_cast<double>(k)), 1e-2}; }

::testing::AssertionResult same_product(const Tensor& cuda_result, const Tensor& cpu_result, int64_t k) {
  if (!is_floating(cpu_result.dtype())) return testing::all_equal(cuda_result.to(Device::cpu()), cpu_result);
  return testing::all_close(cuda_result.to(Device::cpu()), cpu_result, gemm_tolerance(cpu_result.dtype(), k));
}

// A [batch, rows, cols] operand with random values on the CPU, optionally laid out as the
// transpose of a contiguous [batch, cols, rows] tensor (the layout backward passes).
Tensor random_operand(int64_t batch, int64_t rows, int64_t cols, bool transposed, DType dtype, uint64_t seed) {
  if (!transposed) return random_for({batch, rows, cols}, dtype, seed);
  return random_for({batch, cols, rows}, dtype, seed).transpose(1, 2);
}

// The same values and layout on the GPU (contiguous() of a transposed view would lose it).
Tensor same_layout_on_cuda(const Tensor& cpu, bool transposed) {
  if (!transposed) return on_device(cpu, kCuda);
  return on_device(cpu.transpose(1, 2).contiguous(), kCuda).transpose(1, 2);
}

// backend.bmm into a poisoned output, compared with the CPU backend (on contiguous
// copies: the layouts under test are the GPU's).
void expect_bmm_matches_cpu(const Tensor& a_cpu, const Tensor& b_cpu, const Tensor& a_gpu, const Tensor& b_gpu) {
  const Tensor expected = bmm(a_cpu.contiguous(), b_cpu.contiguous());
  const Tensor out = poisoned({a_cpu.size(0), a_cpu.size(1), b_cpu.size(2)}, a_cpu.dtype(), kCuda);
  backend(kCuda).bmm(a_gpu, b_gpu, out);
  EXPECT_TRUE(same_product(out, expected, a_cpu.size(2)))
      << a_cpu.dtype() << " a " << shape_str(a_cpu.sizes()) << " strides " << shape_str(a_gpu.strides()) << ", b "
      << shape_str(b_cpu.sizes()) << " strides " << shape_str(b_gpu.strides());
}

TEST(CudaMatmul, BmmMatchesCpuInEveryDtypeShapeAndTransposeCombination) {
  KILN_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (DType dtype : testing::kNumericDTypes) {
    for (const GemmShape& s : kGemmShapes) {
      for (bool a_t : {false, true}) {
        for (bool b_t : {false, true}) {
          const Tensor a = random_operand(s.batch, s.m, s.k, a_t, dtype, seed++);
          const Tensor b = random_operand(s.batch, s.k, s.n, b_t, dtype, seed++);
          expect_bmm_matches_cpu(a, b, same_layout_on_cuda(a, a_t), same_layout_on_cuda(b, b_t));
        }
      }
    }
  }
}

TEST(CudaMatmul, BroadcastBatchAndOperandsThatNeedACopy) {
  KILN_REQUIRE_CUDA();
  const int64_t batch = 3, m = 7, k = 33, n = 5;
  for (DType dtype : testing::kNumericDTypes) {
    // A batch broadcast with stride 0, read in place.
    const Tensor a1 = random_for({1, m, k}, dtype, 10);
    const Tensor b = random_for({batch, k, n}, dtype, 11);
    expect_bmm_matches_cpu(a1.expand({batch, m, k}), b, on_device(a1, kCuda).expand({batch, m, k}),
                           on_device(b, kCuda));
    // Every other element of the last dim (both matrix strides > 1): copied.
    expect_bmm_matches_cpu(a1.expand({batch, m, k}), b, on_device(a1, kCuda).expand({batch, m, k}),
                           on_device(b, kCuda, /*strided=*/true));
    // A broadcast batch that also needs the copy (copied once, stays broadcast).
    const Tensor b1 = random_for({1, k, n}, dtype, 12);
    const Tensor a = random_for({batch, m, k}, dtype, 13);
    expect_bmm_matches_cpu(a, b1.expand({batch, k, n}), on_device(a, kCuda, /*strided=*/true),
                           on_device(b1, kCuda, /*strided=*/true).expand({batch, k, n}));
    // A column broadcast inside the matrix (stride 0 in K): copied.
    const Tensor column = random_for({batch, m, 1}, dtype, 14);
    expect_bmm_matches_cpu(column.expand({batch, m, k}), b, on_device(column, kCuda).expand({batch, m, k}),
                           on_device(b, kCuda));
    // A batch slice with a storage offset.
    const Tensor wide = random_for({2 * batch, m, k}, dtype, 15);
    expect_bmm_matches_cpu(wide.narrow(0, batch, batch), b, on_device(wide, kCuda).narrow(0, batch, batch),
                           on_device(b, kCuda));
  }
}

TEST(CudaMatmul, StridedAndTransposedOutputsAreWrittenInPlaceOfTheirView) {
  KILN_REQUIRE_CUDA();
  const int64_t batch = 2, m = 9, k = 17, n = 6;
  for (DType dtype : testing::kNumericDTypes) {
    const Tensor a = random_for({batch, m, k}, dtype, 20), b = random_for({batch, k, n}, dtype, 21);
    const Tensor expected = bmm(a, b);
    Tensor buffer;
    const Tensor strided = poisoned_strided({batch, m, n}, dtype, kCuda, &buffer);
    backend(kCuda).bmm(on_device(a, kCuda), on_device(b, kCuda), strided);
    EXPECT_TRUE(same_product(strided, expected, k)) << dtype;
    EXPECT_TRUE(gaps_untouched(buffer)) << dtype;
    const Tensor transposed = poisoned({batch, n, m}, dtype, kCuda).transpose(1, 2);
    backend(kCuda).bmm(on_device(a, kCuda), on_device(b, kCuda), transposed);
    EXPECT_TRUE(same_product(transposed, expected, k)) << dtype;
  }
}

TEST(CudaMatmul, KZeroGivesZerosAndEmptyProductsDoNothing) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kNumericDTypes) {
    const Tensor out = poisoned({2, 3, 4}, dtype, kCuda);
    backend(kCuda).bmm(empty({2, 3, 0}, {.dtype = dtype, .device = kCuda}),
                       empty({2, 0, 4}, {.dtype = dtype, .device = kCuda}), out);
    EXPECT_TRUE(testing::all_equal(out.cpu(), zeros({2, 3, 4}, {.dtype = dtype}))) << dtype;
    for (const GemmShape& s : {GemmShape{0, 3, 5, 4}, GemmShape{2, 0, 5, 4}, GemmShape{2, 3, 5, 0}}) {
      const Tensor a = random_for({s.batch, s.m, s.k}, dtype, 30), b = random_for({s.batch, s.k, s.n}, dtype, 31);
      const Tensor product = bmm(on_device(a, kCuda), on_device(b, kCuda));
      EXPECT_EQ(product.sizes(), (std::vector<int64_t>{s.batch, s.m, s.n}));
      EXPECT_EQ(product.device(), kCuda);
    }
    const Tensor via_op = bmm(empty({2, 3, 0}, {.dtype = dtype, .device = kCuda}),
                              empty({2, 0, 4}, {.dtype = dtype, .device = kCuda}));
    EXPECT_TRUE(testing::all_equal(via_op.cpu(), zeros({2, 3, 4}, {.dtype = dtype}))) << dtype;
  }
}

TEST(CudaMatmul, PublicMatmulAndLinearMatchCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{7}, {7}},           {{7}, {7, 5}},       {{3, 7}, {7}},          {{3, 7}, {7, 5}},
      {{4, 3, 7}, {7, 5}},  {{2, 1, 3, 7}, {4, 7, 5}}, {{7}, {2, 7, 5}}, {{2, 3, 7}, {2, 7, 1}}};
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64}) {
    uint64_t seed = 40;
    for (const auto& [a_shape, b_shape] : cases) {
      const Tensor a = random_for(a_shape, dtype, seed++), b = random_for(b_shape, dtype, seed++);
      const Tensor expected = matmul(a, b);
      EXPECT_TRUE(same_product(matmul(on_device(a, kCuda), on_device(b, kCuda)), expected, 7))
          << dtype << " " << shape_str(a.sizes()) << " @ " << shape_str(b.sizes());
    }
    if (!is_floating(dtype)) continue;
    const Tensor x = random_for({2, 5, 33}, dtype, 60), w = random_for({9, 33}, dtype, 61);
    const Tensor bias = random_for({9}, dtype, 62);
    const Tensor expected = linear(x, w, bias);
    const Tensor actual = linear(on_device(x, kCuda), on_device(w, kCuda, /*strided=*/true), on_device(bias, kCuda));
    EXPECT_TRUE(same_product(actual, expected, 33)) << dtype;
  }
}

// The same graph on both devices; the leaves' gradients must agree.
TEST(CudaMatmul, GradientsThroughLinearAndBatchedMatmulMatchCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tensor x = random_for({3, 4, 17}, dtype, 70), w = random_for({6, 17}, dtype, 71);
    const Tensor bias = random_for({6}, dtype, 72), m = random_for({3, 6, 5}, dtype, 73);
    const Tensor g = random_for({3, 4, 5}, dtype, 74);
    auto run = [&](Device device) {
      // detach(): x.to(cpu) is x itself, and the CPU run must not make the shared inputs
      // leaves that require grad (the GPU's copies of them would then not be leaves).
      std::vector<Tensor> leaves = {x.to(device).detach(), w.to(device).detach(), bias.to(device).detach(),
                                    m.to(device).detach()};
      for (Tensor& leaf : leaves) leaf.requires_grad_();
      const Tensor y = matmul(linear(leaves[0], leaves[1], leaves[2]), leaves[3]);
      y.backward(g.to(device));
      std::vector<Tensor> grads;
      for (const Tensor& leaf : leaves) grads.push_back(leaf.grad());
      return grads;
    };
    const std::vector<Tensor> on_cpu = run(Device::cpu()), on_gpu = run(kCuda);
    for (size_t i = 0; i < on_cpu.size(); ++i) {
      ASSERT_TRUE(on_gpu[i].defined()) << "leaf " << i;
      EXPECT_EQ(on_gpu[i].device(), kCuda);
      // Two products deep: the K of each is at most 17 * 6.
      EXPECT_TRUE(same_product(on_gpu[i], on_cpu[i], 17 * 6)) << dtype << " leaf " << i;
    }
  }
}

// With TF32 allowed, float32 products stay within TF32's error of the CPU's float32
// (tests/cuda/internal/test_cuda_matmul_tf32.cpp checks that the flag really switches).
TEST(CudaMatmul, Float32WithTf32AllowedStaysWithinTf32Tolerance) {
  KILN_REQUIRE_CUDA();
  const kiln::testing::ScopedFlag tf32(set_allow_tf32_matmul, allow_tf32_matmul, true);
  uint64_t seed = 80;
  for (const GemmShape& s : kGemmShapes) {
    for (bool b_t : {false, true}) {
      const Tensor a = random_operand(s.batch, s.m, s.k, false, DType::Float32, seed++);
      const Tensor b = random_operand(s.batch, s.k, s.n, b_t, DType::Float32, seed++);
      const Tensor out = poisoned({s.batch, s.m, s.n}, DType::Float32, kCuda);
      backend(kCuda).bmm(same_layout_on_cuda(a, false), same_layout_on_cuda(b, b_t), out);
      EXPECT_TRUE(testing::all_close(out.cpu(), bmm(a, b), tf32_tolerance(s.k))) << s.m << "x" << s.k << "x" << s.n;
    }
  }
}

TEST(CudaMatmul, Tf32IsOffByDefault) {
  // Runs everywhere: float32 means float32 unless the user asks (Note [TF32]).
  EXPECT_FALSE(allow_tf32_matmul());
}

}  // namespace
}  // namespace kiln
