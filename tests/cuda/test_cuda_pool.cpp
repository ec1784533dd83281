// CUDA pooling against the CPU backend: max (values and indices), average (padding,
// ceil_mode, count_include_pad both ways, divisor_override) and adaptive average, forward
// and backward, in every floating dtype, on odd and multi-block sizes, through the Backend
// interface with poisoned outputs (Note [Poisoned outputs]); the public ops on
// non-contiguous and broadcast inputs with their gradients; NaN windows. Skips without a GPU.
//
// Tolerance: forward max and indices are exact; sums run in the same opmath type in the
// same order on both sides (the CPU backward scatters, the GPU gathers, both in output
// order), so results differ at most by the GPU's contraction of a multiply and an add:
// the dtype's tolerance times 2.
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "core/pool_geometry.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
using testing::Layout;
using Sizes = std::vector<int64_t>;
constexpr double kSlack = 2.0;

struct Case {
  Sizes input;  // [N, C, s...]
  PoolParams params;
};

PoolParams params3(Sizes k, Sizes s, Sizes p, Sizes d, bool ceil, bool include_pad = true, int64_t divisor = 0) {
  return {.kernel = k, .stride = s, .padding = p, .dilation = d, .ceil_mode = ceil,
          .count_include_pad = include_pad, .divisor_override = divisor};
}

const std::vector<Case> kCases = {
    {{2, 3, 17}, params3({3}, {2}, {1}, {1}, false)},
    {{1, 5, 20}, params3({4}, {3}, {2}, {2}, true, false)},
    {{2, 3, 7, 9}, params3({3, 2}, {1, 2}, {1, 1}, {1, 1}, false, false)},
    {{3, 2, 13, 11}, params3({3, 3}, {2, 2}, {1, 1}, {2, 1}, true, true, 5)},
    {{2, 3, 7, 8, 6}, params3({3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false)},
    {{1, 2, 5, 6, 7}, params3({2, 3, 2}, {1, 2, 3}, {0, 1, 1}, {2, 1, 1}, true, false)},
    {{2, 16, 33, 35, 31}, params3({3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, true)},
    {{4, 8, 16, 16, 16}, params3({2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false, true, 3)},
};

Sizes output_of(const Case& c) {
  Sizes out(c.input.begin(), c.input.begin() + 2);
  for (size_t d = 0; d < c.params.kernel.size(); ++d) {
    out.push_back(pool_output_size(c.input[d + 2], c.params.kernel[d], c.params.stride[d], c.params.padding[d],
                                   c.params.dilation[d], c.params.ceil_mode)
                      .value());
  }
  return out;
}

// Average pooling has no dilation (PoolParams).
PoolParams avg_params(const PoolParams& p) {
  PoolParams a = p;
  a.dilation.clear();
  return a;
}

Sizes avg_output_of(const Case& c) {
  Case a = c;
  for (int64_t& d : a.params.dilation) d = 1;
  return output_of(a);
}

TEST(CudaPool, MaxPoolMatchesCpuInEveryDtype) {
  KILN_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (DType dtype : testing::kFloatingDTypes) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(::testing::Message() << dtype << " input " << shape_str(c.input));
      const Sizes out = output_of(c);
      const Tensor x = testing::random_for(c.input, dtype, seed++);
      const Tensor y = zeros(out, {.dtype = dtype});
      const Tensor idx = zeros(out, {.dtype = DType::Int64});
      backend(Device::cpu()).max_pool_forward(x, c.params, y, idx);
      const Tensor cuda_y = testing::poisoned(out, dtype, kCuda);
      const Tensor cuda_idx = testing::poisoned(out, DType::Int64, kCuda);
      backend(kCuda).max_pool_forward(testing::on_device(x, kCuda), c.params, cuda_y, cuda_idx);
      EXPECT_TRUE(testing::all_equal(cuda_y.to(Device::cpu()), y));
      EXPECT_TRUE(testing::all_equal(cuda_idx.to(Device::cpu()), idx));

      const Tensor g = testing::random_for(out, dtype, seed++);
      const Tensor gx = zeros(c.input, {.dtype = dtype});
      backend(Device::cpu()).max_pool_backward(g, idx, c.params, gx);
      const Tensor cuda_gx = testing::poisoned(c.input, dtype, kCuda);
      backend(kCuda).max_pool_backward(testing::on_device(g, kCuda), cuda_idx, c.params, cuda_gx);
      EXPECT_TRUE(testing::matches_cpu(cuda_gx, gx, kSlack));
    }
  }
}

TEST(CudaPool, AvgPoolMatchesCpuInEveryDtype) {
  KILN_REQUIRE_CUDA();
  uint64_t seed = 100;
  for (DType dtype : testing::kFloatingDTypes) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(::testing::Message() << dtype << " input " << shape_str(c.input));
      const PoolParams params = avg_params(c.params);
      const Sizes out = avg_output_of(c);
      const Tensor x = testing::random_for(c.input, dtype, seed++);
      const Tensor y = zeros(out, {.dtype = dtype});
      backend(Device::cpu()).avg_pool_forward(x, params, y);
      const Tensor cuda_y = testing::poisoned(out, dtype, kCuda);
      backend(kCuda).avg_pool_forward(testing::on_device(x, kCuda), params, cuda_y);
      EXPECT_TRUE(testing::matches_cpu(cuda_y, y, kSlack));

      const Tensor g = testing::random_for(out, dtype, seed++);
      const Tensor gx = zeros(c.input, {.dtype = dtype});
      backend(Device::cpu()).avg_pool_backward(g, params, gx);
      const Tensor cuda_gx = testing::poisoned(c.input, dtype, kCuda);
      backend(kCuda).avg_pool_backward(testing::on_device(g, kCuda), params, cuda_gx);
      EXPECT_TRUE(testing::matches_cpu(cuda_gx, gx, kSlack));
    }
  }
}

TEST(CudaPool, AdaptiveAvgPoolMatchesCpuInEveryDtype) {
  KILN_REQUIRE_CUDA();
  const std::vector<std::pair<Sizes, Sizes>> cases = {
      {{2, 3, 7}, {2, 3, 3}},           {{2, 3, 5}, {2, 3, 5}},         {{3, 2, 4}, {3, 2, 1}},
      {{1, 2, 3}, {1, 2, 5}},           {{2, 2, 7, 5}, {2, 2, 3, 2}},   {{2, 3, 13, 17}, {2, 3, 4, 6}},
      {{2, 2, 5, 7, 4}, {2, 2, 3, 2, 1}}, {{8, 32, 4, 4, 4}, {8, 32, 1, 1, 1}},
      {{2, 4, 19, 18, 17}, {2, 4, 1, 1, 1}}, {{1, 2, 3, 5, 7}, {1, 2, 7, 5, 3}}};
  uint64_t seed = 200;
  for (DType dtype : testing::kFloatingDTypes) {
    for (const auto& [in, out] : cases) {
      SCOPED_TRACE(::testing::Message() << dtype << " input " << shape_str(in) << " output " << shape_str(out));
      const Tensor x = testing::random_for(in, dtype, seed++);
      const Tensor y = zeros(out, {.dtype = dtype});
      backend(Device::cpu()).adaptive_avg_pool_forward(x, y);
      const Tensor cuda_y = testing::poisoned(out, dtype, kCuda);
      backend(kCuda).adaptive_avg_pool_forward(testing::on_device(x, kCuda), cuda_y);
      EXPECT_TRUE(testing::matches_cpu(cuda_y, y, kSlack));

      const Tensor g = testing::random_for(out, dtype, seed++);
      const Tensor gx = zeros(in, {.dtype = dtype});
      backend(Device::cpu()).adaptive_avg_pool_backward(g, gx);
      const Tensor cuda_gx = testing::poisoned(in, dtype, kCuda);
      backend(kCuda).adaptive_avg_pool_backward(testing::on_device(g, kCuda), cuda_gx);
      EXPECT_TRUE(testing::matches_cpu(cuda_gx, gx, kSlack));
    }
  }
}

// The public ops on every input layout (the op layer makes the input contiguous), with
// gradients through autograd.
TEST(CudaPool, OpsMatchCpuOnEveryLayoutWithGradients) {
  KILN_REQUIRE_CUDA();
  const Sizes sizes = {2, 3, 9, 7, 8};
  const std::vector<std::function<Tensor(const Tensor&)>> ops = {
      [](const Tensor& t) { return max_pool3d(t, {3}, {2}, {1}); },
      [](const Tensor& t) { return avg_pool3d(t, {3, 2, 3}, {2, 1, 2}, {1}, true, false); },
      [](const Tensor& t) { return adaptive_avg_pool3d(t, {4, 3, 5}); },
      [](const Tensor& t) { return max_pool2d(t.flatten(1, 2), {2}, {1}, {1}, {2}); },
      [](const Tensor& t) { return avg_pool1d(t.flatten(2, 4), {5}, {3}, {2}); }};
  for (DType dtype : testing::kFloatingDTypes) {
    for (Layout layout : testing::kLayouts) {
      for (size_t k = 0; k < ops.size(); ++k) {
        SCOPED_TRACE(::testing::Message() << dtype << " " << testing::layout_name(layout) << " op " << k);
        const auto [cpu_x, cuda_x] = testing::parity_input(sizes, dtype, layout, 300 + k);
        Tensor a = cpu_x.detach().requires_grad_(), b = cuda_x.detach().requires_grad_();
        const Tensor ya = ops[k](a), yb = ops[k](b);
        EXPECT_TRUE(testing::matches_cpu(yb, ya, kSlack));
        const Tensor w = testing::random_for(ya.sizes(), dtype, 400 + k);
        (ya * w).sum().backward();
        (yb * w.to(kCuda)).sum().backward();
        EXPECT_TRUE(testing::matches_cpu(b.grad(), a.grad(), 8.0));  // + the sum's rounding in half types
      }
    }
  }
}

// Max pooling through the Backend on the CPU and on the GPU (poisoned outputs): values and
// indices exactly, then the gather backward against the CPU's scatter.
void expect_max_pool_matches_cpu(const Tensor& x, const PoolParams& params, const Sizes& out, uint64_t seed) {
  const DType dtype = x.dtype();
  const Tensor y = zeros(out, {.dtype = dtype});
  const Tensor idx = zeros(out, {.dtype = DType::Int64});
  backend(Device::cpu()).max_pool_forward(x, params, y, idx);
  const Tensor cuda_y = testing::poisoned(out, dtype, kCuda);
  const Tensor cuda_idx = testing::poisoned(out, DType::Int64, kCuda);
  backend(kCuda).max_pool_forward(testing::on_device(x, kCuda), params, cuda_y, cuda_idx);
  EXPECT_TRUE(testing::all_equal(cuda_y.to(Device::cpu()), y));
  EXPECT_TRUE(testing::all_equal(cuda_idx.to(Device::cpu()), idx));

  const Tensor g = testing::random_for(out, dtype, seed);
  const Tensor gx = zeros(x.sizes(), {.dtype = dtype});
  backend(Device::cpu()).max_pool_backward(g, idx, params, gx);
  const Tensor cuda_gx = testing::poisoned(x.sizes(), dtype, kCuda);
  backend(kCuda).max_pool_backward(testing::on_device(g, kCuda), cuda_idx, params, cuda_gx);
  EXPECT_TRUE(testing::matches_cpu(cuda_gx, gx, kSlack));
}

// Few distinct values (-2..2), so most windows tie and one element is the max of many
// overlapping windows: the gather must find every window whose (first-in-order) max it is.
Tensor tied_input(const Sizes& sizes, DType dtype) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 7 + i / 5) % 5 - 2);
  return tensor(v, sizes).to(dtype);
}

// The gather backward (one thread per input element, outputs_covering's range) where the
// windows overlap by more than the stride and dilation leaves gaps in them: with padding,
// ceil_mode, strides above and below the span, and windows with no tap in the input
// (-inf, index -1, a grad_in of zeros that must still be written).
TEST(CudaPool, MaxPoolGatherBackwardCoversDilatedOverlappingWindows) {
  KILN_REQUIRE_CUDA();
  const std::vector<Case> cases = {
      {{2, 3, 29}, params3({5}, {2}, {2}, {3}, true)},
      {{3, 2, 31}, params3({4}, {1}, {2}, {2}, false)},
      {{2, 4, 15, 13}, params3({3, 4}, {1, 2}, {1, 2}, {2, 3}, false)},
      {{2, 3, 12, 14}, params3({3, 3}, {2, 1}, {1, 1}, {3, 2}, true)},
      {{2, 3, 2, 5}, params3({2, 2}, {1, 1}, {1, 1}, {3, 1}, false)},  // every row window has no tap
      {{1, 3, 9, 10, 11}, params3({3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {2, 2, 2}, true)},
      {{2, 2, 8, 9, 7}, params3({2, 3, 2}, {2, 1, 3}, {1, 1, 0}, {3, 2, 2}, true)},
      {{1, 2, 7, 9, 8}, params3({3, 2, 3}, {3, 1, 2}, {1, 1, 1}, {1, 4, 2}, false)},
  };
  uint64_t seed = 500;
  for (DType dtype : testing::kFloatingDTypes) {
    for (const Case& c : cases) {
      const Sizes out = output_of(c);
      SCOPED_TRACE(::testing::Message() << dtype << " input " << shape_str(c.input) << " output " << shape_str(out));
      expect_max_pool_matches_cpu(testing::random_for(c.input, dtype, seed), c.params, out, seed + 1);
      expect_max_pool_matches_cpu(tied_input(c.input, dtype), c.params, out, seed + 2);
      seed += 3;
    }
  }
}

// Average windows of kWarpWindow (64) elements or more get a warp per output
// (avg_pool_fwd_warp); the cases above only reach that path through adaptive pooling.
// These clip their windows at both ends (padding, ceil_mode) and cover every divisor.
TEST(CudaPool, AvgPoolLargeWindowsMatchCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<Case> cases = {
      {{3, 2, 200}, params3({70}, {13}, {35}, {}, true)},
      {{2, 5, 17, 19}, params3({8, 9}, {3, 4}, {4, 3}, {}, true, false)},
      {{2, 3, 11, 12, 13}, params3({4, 4, 4}, {3, 2, 3}, {2, 1, 2}, {}, true, false)},
      {{2, 3, 11, 12, 13}, params3({4, 4, 4}, {3, 2, 3}, {2, 1, 2}, {}, false, true)},
      {{1, 4, 9, 10, 11}, params3({5, 4, 4}, {2, 3, 1}, {2, 2, 1}, {}, true, true, 7)},
  };
  uint64_t seed = 600;
  for (DType dtype : testing::kFloatingDTypes) {
    for (const Case& c : cases) {
      Case with_dilation = c;
      with_dilation.params.dilation.assign(c.params.kernel.size(), 1);
      const Sizes out = output_of(with_dilation);
      SCOPED_TRACE(::testing::Message() << dtype << " input " << shape_str(c.input) << " output " << shape_str(out));
      const Tensor x = testing::random_for(c.input, dtype, seed++);
      const Tensor y = zeros(out, {.dtype = dtype});
      backend(Device::cpu()).avg_pool_forward(x, c.params, y);
      const Tensor cuda_y = testing::poisoned(out, dtype, kCuda);
      backend(kCuda).avg_pool_forward(testing::on_device(x, kCuda), c.params, cuda_y);
      EXPECT_TRUE(testing::matches_cpu(cuda_y, y, kSlack));

      const Tensor g = testing::random_for(out, dtype, seed++);
      const Tensor gx = zeros(c.input, {.dtype = dtype});
      backend(Device::cpu()).avg_pool_backward(g, c.params, gx);
      const Tensor cuda_gx = testing::poisoned(c.input, dtype, kCuda);
      backend(kCuda).avg_pool_backward(testing::on_device(g, kCuda), c.params, cuda_gx);
      EXPECT_TRUE(testing::matches_cpu(cuda_gx, gx, kSlack));
    }
  }
}

TEST(CudaPool, MaxPoolNaNWindowsMatchCpu) {
  KILN_REQUIRE_CUDA();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = tensor<double>({1, nan, 3, 3, nan, nan, -2, 5, 5, nan, 0, 1}, {1, 2, 6});
  for (DType dtype : testing::kFloatingDTypes) {
    const auto [cpu_v, cpu_i] = max_pool_with_indices(x.to(dtype), 1, {3}, {1}, {1});
    const auto [cuda_v, cuda_i] = max_pool_with_indices(x.to(dtype).to(kCuda), 1, {3}, {1}, {1});
    EXPECT_TRUE(testing::all_equal(cuda_i.to(Device::cpu()), cpu_i));
    EXPECT_TRUE(testing::matches_cpu(cuda_v, cpu_v));
  }
}

}  // namespace
}  // namespace kiln
