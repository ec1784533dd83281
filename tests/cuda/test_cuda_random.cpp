// CUDA random kernels (kernels/cuda/random.cu) against the CPU: Note [Philox streams]
// promises the same numbers on both devices for the same seed and offset. rand, randint,
// bernoulli and randperm are bit-identical; randn is bit-identical for float32/16/bf16
// except when the double result lies within CUDA's 1-2 ulp of log/cos of a rounding
// boundary (about 2^-28 of float32 draws: a handful in a million, each one ulp off), and
// for float64 equal to ~1e-15 relative. Sizes 0, 1, odd, and 2^20; every op drawn twice
// from one generator so the second draw starts at a non-zero offset. Also dropout (built
// from bernoulli and mul), randperm's permutation property, and cat of CUDA tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::kCuda;
using Shape = std::vector<int64_t>;

const std::vector<Shape> kSizes = {{0}, {1}, {7}, {3, 5}, {1 << 20}};
constexpr uint64_t kSeed = 20240601;

std::string describe(DType dtype, const Shape& shape) {
  std::ostringstream os;
  os << dtype << " " << shape;
  return os.str();
}

// Draws make(options, generator) twice on the CPU and on CUDA from generators of one seed
// and checks each pair with `same`.
template <typename Make, typename Same>
void expect_same_draws(DType dtype, const Make& make, const Same& same) {
  Generator cpu_gen(kSeed), cuda_gen(kSeed);
  for (int draw = 0; draw < 2; ++draw) {
    SCOPED_TRACE(draw == 0 ? "first draw (offset 0)" : "second draw (offset > 0)");
    const Tensor on_cpu = make(TensorOptions{.dtype = dtype}, &cpu_gen);
    const Tensor on_cuda = make(TensorOptions{.dtype = dtype, .device = kCuda}, &cuda_gen);
    EXPECT_EQ(on_cuda.device(), kCuda);
    EXPECT_TRUE(same(on_cuda.cpu(), on_cpu));
  }
  EXPECT_EQ(cpu_gen.offset(), cuda_gen.offset());
}

const auto exactly = [](const Tensor& a, const Tensor& b) { return all_equal(a, b); };

TEST(CudaRandom, RandMatchesCpuExactly) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const Shape& sizes : kSizes) {
      SCOPED_TRACE(describe(dtype, sizes));
      expect_same_draws(dtype, [&](TensorOptions o, Generator* g) { return rand(sizes, o, g); }, exactly);
    }
  }
}

TEST(CudaRandom, UniformWithBoundsMatchesCpuExactly) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    SCOPED_TRACE(describe(dtype, {1001}));
    Generator cpu_gen(kSeed), cuda_gen(kSeed);
    Tensor on_cpu = empty({1001}, {.dtype = dtype});
    Tensor on_cuda = empty({1001}, {.dtype = dtype, .device = kCuda});
    backend(Device::cpu()).uniform(on_cpu, -2.5, 7.25, cpu_gen.reserve(1001));
    backend(kCuda).uniform(on_cuda, -2.5, 7.25, cuda_gen.reserve(1001));
    EXPECT_TRUE(all_equal(on_cuda.cpu(), on_cpu));
  }
}

// Exact but for rare one-ulp differences (see the header): at most one in 10^5 elements
// may differ, and each by no more than the dtype's tolerance.
::testing::AssertionResult normals_match(const Tensor& cuda_result, const Tensor& cpu_result) {
  if (cpu_result.dtype() == DType::Float64) return all_close(cuda_result, cpu_result, {1e-14, 1e-14});
  const ::testing::AssertionResult close = all_close(cuda_result, cpu_result, testing::tolerance_for(cpu_result.dtype()));
  if (!close) return close;
  const Tensor differ = ne(cuda_result, cpu_result).contiguous();
  const bool* flags = differ.data_ptr<bool>();
  const int64_t mismatches = std::count(flags, flags + differ.numel(), true);
  if (mismatches * 100000 > std::max<int64_t>(cpu_result.numel(), 100000)) {
    return ::testing::AssertionFailure() << mismatches << " of " << cpu_result.numel() << " normals differ";
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaRandom, RandnMatchesCpu) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    for (const Shape& sizes : kSizes) {
      SCOPED_TRACE(describe(dtype, sizes));
      expect_same_draws(dtype, [&](TensorOptions o, Generator* g) { return randn(sizes, o, g); }, normals_match);
    }
  }
  // mean and std go through the backend as the CPU's: mean + std * z in double.
  Generator cpu_gen(kSeed), cuda_gen(kSeed);
  Tensor on_cpu = empty({999}, {.dtype = DType::Float32});
  Tensor on_cuda = empty({999}, {.dtype = DType::Float32, .device = kCuda});
  backend(Device::cpu()).normal(on_cpu, 3.0, 0.5, cpu_gen.reserve(999));
  backend(kCuda).normal(on_cuda, 3.0, 0.5, cuda_gen.reserve(999));
  EXPECT_TRUE(normals_match(on_cuda.cpu(), on_cpu));
}

TEST(CudaRandom, RandintMatchesCpuExactly) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kNumericDTypes) {
    // Within every dtype's exact integers (bfloat16: |v| <= 256).
    const int64_t low = dtype == DType::UInt8 ? 3 : -100, high = dtype == DType::UInt8 ? 250 : 200;
    for (const Shape& sizes : kSizes) {
      SCOPED_TRACE(describe(dtype, sizes));
      expect_same_draws(dtype, [&](TensorOptions o, Generator* g) { return randint(low, high, sizes, o, g); }, exactly);
    }
  }
  // The whole int64 range: low + u64 mod range wraps identically.
  expect_same_draws(DType::Int64, [](TensorOptions o, Generator* g) {
    return randint(INT64_MIN / 2, INT64_MAX / 2, {513}, o, g);
  }, exactly);
}

TEST(CudaRandom, BernoulliMatchesCpuExactly) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kAllDTypes) {
    for (double p : {0.0, 0.3, 1.0}) {
      for (const Shape& sizes : kSizes) {
        SCOPED_TRACE(describe(dtype, sizes) + " p " + std::to_string(p));
        expect_same_draws(dtype, [&](TensorOptions o, Generator* g) { return bernoulli(sizes, p, o, g); }, exactly);
      }
    }
  }
}

// Every value 0..n-1 exactly once (`perm` on the CPU, int64).
bool is_permutation(const Tensor& perm) {
  const int64_t n = perm.numel();
  const Tensor values = perm.contiguous();
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = values.data_ptr<int64_t>()[i];
    if (v < 0 || v >= n || seen[v]) return false;
    seen[v] = true;
  }
  return true;
}

TEST(CudaRandom, RandpermIsThePermutationOfTheCpu) {
  KILN_REQUIRE_CUDA();
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}, int64_t{1} << 20}) {
    SCOPED_TRACE("n " + std::to_string(n));
    expect_same_draws(DType::Int64, [&](TensorOptions o, Generator* g) { return randperm(n, o, g); }, exactly);
    Generator gen(kSeed + 1);
    const Tensor perm = randperm(n, {.dtype = DType::Int64, .device = kCuda}, &gen).cpu();
    EXPECT_TRUE(is_permutation(perm));
  }
  // Other dtypes are converted after the int64 permutation, as on the CPU.
  expect_same_draws(DType::Float32, [](TensorOptions o, Generator* g) { return randperm(100, o, g); }, exactly);
}

// ---- dropout ------------------------------------------------------------------------------

TEST(CudaRandom, DropoutKeepsTheCpuMaskAndScales) {
  KILN_REQUIRE_CUDA();
  for (DType dtype : testing::kFloatingDTypes) {
    SCOPED_TRACE(describe(dtype, {64, 33}));
    const Tensor x = testing::random_for({64, 33}, dtype, 5);
    for (double p : {0.25, 0.5}) {
      Generator cpu_gen(kSeed), cuda_gen(kSeed);
      const Tensor on_cpu = dropout(x, p, /*training=*/true, &cpu_gen);
      const Tensor on_cuda = dropout(x.to(kCuda), p, /*training=*/true, &cuda_gen).cpu();
      EXPECT_TRUE(all_equal(on_cuda, on_cpu));
      // Kept elements are x / (1 - p), dropped ones 0.
      const Tensor kept = ne(on_cuda, Scalar(0.0));
      const Tensor scaled = mul(x, Scalar(1.0 / (1.0 - p)));
      EXPECT_TRUE(testing::matches_cpu(where(kept, scaled, zeros_like(x)).to(kCuda), on_cuda));
    }
    Generator gen(kSeed);
    const Tensor x_cuda = x.to(kCuda);
    EXPECT_TRUE(dropout(x_cuda, 0.0, true, &gen).is_same(x_cuda));  // p = 0: x itself
    EXPECT_TRUE(all_equal(dropout(x_cuda, 1.0, true, &gen).cpu(), zeros_like(x)));
    EXPECT_TRUE(dropout(x_cuda, 0.5, /*training=*/false, &gen).is_same(x_cuda));
  }
}

// ---- cat (through copy into narrow views) -------------------------------------------------

TEST(CudaRandom, CatOfCudaTensorsMatchesCpuWithPromotion) {
  KILN_REQUIRE_CUDA();
  const Tensor a = testing::random_for({2, 3}, DType::Float16, 6);
  const Tensor b = testing::random_for({4, 3}, DType::Float32, 7);
  const Tensor c = testing::random_for({1, 3}, DType::Int32, 8);
  const Tensor expected = cat({a, b, c}, 0);
  const Tensor got = cat({a.to(kCuda), testing::on_device(b, kCuda, true), c.to(kCuda)}, 0);
  EXPECT_EQ(got.device(), kCuda);
  EXPECT_TRUE(all_equal(got.cpu(), expected));
  const Tensor d = testing::random_for({2, 5}, DType::BFloat16, 9);
  EXPECT_TRUE(all_equal(cat({a.to(kCuda), d.to(kCuda)}, 1).cpu(), cat({a, d}, 1)));
}

}  // namespace
}  // namespace kiln
