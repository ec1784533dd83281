// CUDA convolution (cuDNN, kernels/cuda/cudnn/) against the CPU backend, and the
// algorithm cache seen through kiln::cudnn (core/cudnn.h). Skips without a GPU, except the
// tests of what kiln::cudnn does when CUDA is not available.
//
// Parity: conv1d/2d/3d forward, backward-data and backward-weight through the Backend
// interface on both devices, every floating dtype, shapes with stride, padding, dilation,
// groups, depthwise, batch 1, a 7x7x7 stem and a 1x1x1 downsample; outputs are poisoned
// (Note [Poisoned outputs]) and one case writes into a strided output through
// non-contiguous operands. The public ops kiln::conv1d/2d/3d, forward and backward with
// bias, groups and a non-contiguous input, against the CPU in every floating dtype; and
// the transposed convolutions (core/ops/conv_transpose.h: cuDNN's backward-data forward,
// its forward as the input gradient), the cropped output_padding path included.
// Tolerance: both devices accumulate K products (K = the reduction length of the pass) in
// float32 (float64 for float64) but in different orders, and cuDNN's FFT and Winograd
// algorithms add transform rounding; the dtype's tolerance times max(8, 4 sqrt(K)).
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>
#include <unistd.h>

#include "core/backend.h"
#include "core/cudnn.h"
#include "core/ops/conv.h"
#include "core/ops/conv_transpose.h"
#include "core/ops/elementwise.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;

struct ConvCase {
  std::vector<int64_t> input;   // [N, C_in, s...]
  std::vector<int64_t> weight;  // [C_out, C_in / groups, k...]
  ConvParams params;
};

ConvCase make_case(std::vector<int64_t> input, std::vector<int64_t> weight, std::vector<int64_t> stride,
                   std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  return {std::move(input), std::move(weight),
          ConvParams{.stride = std::move(stride), .padding = std::move(padding), .dilation = std::move(dilation),
                     .groups = groups}};
}

const std::vector<ConvCase> kCases = {
    make_case({2, 4, 17}, {6, 4, 3}, {1}, {1}, {1}, 1),                      // conv1d
    make_case({1, 4, 20}, {4, 2, 5}, {2}, {3}, {2}, 2),                      // conv1d, everything
    make_case({2, 3, 9, 11}, {8, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1),       // conv2d
    make_case({3, 6, 10, 7}, {4, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2),       // conv2d, groups
    make_case({2, 8, 12, 12}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8),      // depthwise
    make_case({2, 4, 6, 7, 5}, {6, 4, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1),  // conv3d
    make_case({1, 1, 12, 12, 12}, {8, 1, 7, 7, 7}, {2, 2, 2}, {3, 3, 3}, {1, 1, 1}, 1),  // ResNet stem
    make_case({2, 8, 6, 6, 6}, {16, 8, 1, 1, 1}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, 1),  // 1x1x1 downsample
    make_case({1, 6, 7, 8, 9}, {6, 2, 3, 3, 3}, {1, 2, 1}, {2, 1, 0}, {2, 1, 1}, 3),  // batch 1, all at once
};

std::vector<int64_t> output_sizes(const ConvCase& c) {
  std::vector<int64_t> out = {c.input[0], c.weight[0]};
  for (size_t i = 0; i + 2 < c.input.size(); ++i) {
    const int64_t s = c.input[i + 2], k = c.weight[i + 2];
    const ConvParams& p = c.params;
    out.push_back((s + 2 * p.padding[i] - p.dilation[i] * (k - 1) - 1) / p.stride[i] + 1);
  }
  return out;
}

int64_t product(const std::vector<int64_t>& v, size_t from) {
  int64_t n = 1;
  for (size_t i = from; i < v.size(); ++i) n *= v[i];
  return n;
}

double slack_for(int64_t reduction_length) {
  return std::max(8.0, 4.0 * std::sqrt(static_cast<double>(reduction_length)));
}

std::string describe(const ConvCase& c, DType dtype) {
  return ::testing::PrintToString(c.input) + " * " + ::testing::PrintToString(c.weight) + " stride " +
         ::testing::PrintToString(c.params.stride) + " padding " + ::testing::PrintToString(c.params.padding) +
         " dilation " + ::testing::PrintToString(c.params.dilation) + " groups " + std::to_string(c.params.groups) +
         " " + std::string(dtype_name(dtype));
}

// The three passes of `c` on both devices, compared.
void check_case(const ConvCase& c, DType dtype) {
  SCOPED_TRACE(describe(c, dtype));
  const std::vector<int64_t> out_sizes = output_sizes(c);
  const Tensor x = testing::random_for(c.input, dtype, 1), w = testing::random_for(c.weight, dtype, 2);
  const Tensor dy = testing::random_for(out_sizes, dtype, 3);
  const Tensor x_cuda = testing::on_device(x, kCuda), w_cuda = testing::on_device(w, kCuda);
  const Tensor dy_cuda = testing::on_device(dy, kCuda);
  Backend& cpu = backend(Device::cpu());
  Backend& gpu = backend(kCuda);
  const int64_t kernel_volume = product(c.weight, 2);
  {
    const Tensor expected = zeros(out_sizes, {.dtype = dtype});
    cpu.conv_forward(x, w, c.params, expected);
    const Tensor actual = testing::poisoned(out_sizes, dtype, kCuda);
    gpu.conv_forward(x_cuda, w_cuda, c.params, actual);
    EXPECT_TRUE(testing::matches_cpu(actual, expected, slack_for(c.weight[1] * kernel_volume))) << "forward";
  }
  {
    const Tensor expected = zeros(c.input, {.dtype = dtype});
    cpu.conv_backward_input(dy, w, c.params, expected);
    const Tensor actual = testing::poisoned(c.input, dtype, kCuda);
    gpu.conv_backward_input(dy_cuda, w_cuda, c.params, actual);
    EXPECT_TRUE(testing::matches_cpu(actual, expected, slack_for(c.weight[0] / c.params.groups * kernel_volume)))
        << "backward input";
  }
  {
    const Tensor expected = zeros(c.weight, {.dtype = dtype});
    cpu.conv_backward_weight(dy, x, c.params, expected);
    const Tensor actual = testing::poisoned(c.weight, dtype, kCuda);
    gpu.conv_backward_weight(dy_cuda, x_cuda, c.params, actual);
    EXPECT_TRUE(testing::matches_cpu(actual, expected, slack_for(out_sizes[0] * product(out_sizes, 2))))
        << "backward weight";
  }
}

TEST(CudaConv, EveryPassMatchesCpuInEveryDtypeWithHeuristics) {
  KILN_REQUIRE_CUDA();
  const cudnn::ScopedMode mode(/*benchmark=*/false, /*deterministic=*/false);
  for (DType dtype : testing::kFloatingDTypes) {
    for (const ConvCase& c : kCases) check_case(c, dtype);
  }
}

TEST(CudaConv, EveryPassMatchesCpuInBenchmarkAndDeterministicModes) {
  KILN_REQUIRE_CUDA();
  for (bool deterministic : {false, true}) {
    const cudnn::ScopedMode mode(/*benchmark=*/true, deterministic);
    cudnn::clear_algorithm_cache();
    for (DType dtype : {DType::Float32, DType::Float16}) {
      for (const ConvCase& c : kCases) check_case(c, dtype);
    }
  }
}

TEST(CudaConv, Tf32ConvMatchesCpuWithinTf32Error) {
  KILN_REQUIRE_CUDA();
  const kiln::testing::ScopedFlag tf32(set_allow_tf32_conv, allow_tf32_conv, true);
  const ConvCase c = kCases[5];
  const Tensor x = testing::random_for(c.input, DType::Float32, 1), w = testing::random_for(c.weight, DType::Float32, 2);
  const Tensor expected = zeros(output_sizes(c), {.dtype = DType::Float32});
  backend(Device::cpu()).conv_forward(x, w, c.params, expected);
  const Tensor actual = testing::poisoned(output_sizes(c), DType::Float32, kCuda);
  backend(kCuda).conv_forward(testing::on_device(x, kCuda), testing::on_device(w, kCuda), c.params, actual);
  // TF32 rounds inputs to 10 mantissa bits (~5e-4 relative each): float16's tolerance.
  EXPECT_TRUE(testing::all_close(actual.cpu(), expected,
                                 {.atol = 1e-3 * slack_for(108), .rtol = 2e-3 * slack_for(108)}));
}

TEST(CudaConv, NonContiguousOperandsAndAStridedOutput) {
  KILN_REQUIRE_CUDA();
  const ConvCase c = kCases[2];
  const std::vector<int64_t> out_sizes = output_sizes(c);
  const Tensor x = testing::random_for(c.input, DType::Float32, 4), w = testing::random_for(c.weight, DType::Float32, 5);
  const Tensor expected = zeros(out_sizes, {.dtype = DType::Float32});
  backend(Device::cpu()).conv_forward(x, w, c.params, expected);
  Tensor buffer;
  const Tensor actual = testing::poisoned_strided(out_sizes, DType::Float32, kCuda, &buffer);
  backend(kCuda).conv_forward(testing::on_device(x, kCuda, /*strided=*/true),
                              testing::on_device(w, kCuda, /*strided=*/true), c.params, actual);
  EXPECT_TRUE(testing::matches_cpu(actual, expected, slack_for(27)));
  EXPECT_TRUE(testing::gaps_untouched(buffer));
}

TEST(CudaConv, EmptyBatchGivesZeroWeightGradientAndAnEmptyOutput) {
  KILN_REQUIRE_CUDA();
  const ConvParams params{.stride = {1, 1}, .padding = {0, 0}, .dilation = {1, 1}, .groups = 1};
  const Tensor x = zeros({0, 3, 5, 5}, {.dtype = DType::Float32, .device = kCuda});
  const Tensor w = ones({4, 3, 3, 3}, {.dtype = DType::Float32, .device = kCuda});
  const Tensor out = empty({0, 4, 3, 3}, {.dtype = DType::Float32, .device = kCuda});
  backend(kCuda).conv_forward(x, w, params, out);
  const Tensor grad_weight = testing::poisoned({4, 3, 3, 3}, DType::Float32, kCuda);
  backend(kCuda).conv_backward_weight(out, x, params, grad_weight);
  EXPECT_EQ(grad_weight.abs().max().item<double>(), 0.0);
}

// ---- the public ops ----------------------------------------------------------------------

// One call of kiln::conv1d / conv2d / conv3d: shapes, bias or not, and the geometry.
struct OpCase {
  std::vector<int64_t> input, weight;
  bool bias;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};

Tensor conv_op(const OpCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  switch (c.input.size()) {
    case 3: return conv1d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    case 4: return conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    default: return conv3d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  }
}

// kiln::conv{1,2,3}d forward and backward (input, weight and bias gradients) on CUDA
// against the CPU, with bias, groups and a non-contiguous input, in every floating dtype.
// The 1-d cases go through cuDNN as 2-d (Note [1-d convolution in cuDNN]) with stride,
// padding and dilation all different from 1, so a unit dim applied to the wrong place in
// any descriptor shows up here.
TEST(CudaConv, PublicOpsForwardAndBackwardMatchCpu) {
  KILN_REQUIRE_CUDA();
  const kiln::testing::ScopedFlag no_tf32(set_allow_tf32_conv, allow_tf32_conv, false);
  const cudnn::ScopedMode mode(/*benchmark=*/false, /*deterministic=*/false);
  const std::vector<OpCase> cases = {
      {{2, 4, 19}, {6, 2, 3}, true, {2}, {2}, {3}, 2},
      {{3, 3, 16}, {5, 3, 4}, false, {1}, {0}, {1}, 1},
      {{2, 6, 9, 8}, {9, 2, 3, 2}, true, {2, 1}, {1, 2}, {1, 2}, 3},
      {{1, 4, 7, 7}, {4, 1, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 4},  // depthwise
      {{2, 4, 5, 6, 7}, {6, 2, 3, 3, 2}, true, {1, 2, 1}, {1, 1, 0}, {1, 1, 2}, 2},
  };
  for (DType dtype : testing::kFloatingDTypes) {
    for (const OpCase& c : cases) {
      SCOPED_TRACE(::testing::PrintToString(c.input) + " * " + ::testing::PrintToString(c.weight) + " groups " +
                   std::to_string(c.groups) + " " + std::string(dtype_name(dtype)));
      const Tensor x = testing::random_for(c.input, dtype, 11), w = testing::random_for(c.weight, dtype, 12);
      const Tensor b = c.bias ? testing::random_for({c.weight[0]}, dtype, 13) : Tensor();
      const Tensor cx = x.detach().requires_grad_(true), cw = w.detach().requires_grad_(true);
      const Tensor cb = c.bias ? b.detach().requires_grad_(true) : Tensor();
      const Tensor gx = testing::on_device(x, kCuda, /*strided=*/true).detach().requires_grad_(true);
      const Tensor gw = testing::on_device(w, kCuda).detach().requires_grad_(true);
      const Tensor gb = c.bias ? testing::on_device(b, kCuda).detach().requires_grad_(true) : Tensor();
      ASSERT_FALSE(gx.is_contiguous());
      const Tensor cpu_y = conv_op(c, cx, cw, cb);
      const Tensor gpu_y = conv_op(c, gx, gw, gb);
      ASSERT_EQ(gpu_y.sizes(), cpu_y.sizes());
      const int64_t kernel_volume = product(c.weight, 2);
      EXPECT_TRUE(testing::matches_cpu(gpu_y, cpu_y, slack_for(c.weight[1] * kernel_volume))) << "forward";
      const Tensor dy = testing::random_for(cpu_y.sizes(), dtype, 14);
      cpu_y.backward(dy);
      gpu_y.backward(testing::on_device(dy, kCuda));
      const int64_t per_output_channel = cpu_y.sizes()[0] * product(cpu_y.sizes(), 2);
      EXPECT_TRUE(testing::matches_cpu(gx.grad(), cx.grad(), slack_for(c.weight[0] / c.groups * kernel_volume)))
          << "input gradient";
      EXPECT_TRUE(testing::matches_cpu(gw.grad(), cw.grad(), slack_for(per_output_channel))) << "weight gradient";
      if (c.bias) {
        EXPECT_TRUE(testing::matches_cpu(gb.grad(), cb.grad(), slack_for(per_output_channel))) << "bias gradient";
      }
    }
  }
}

// kiln::conv_transpose forward and backward on CUDA against the CPU, every floating dtype,
// a non-contiguous input: MedicalNet's 2x upsampling (kernel 2, stride 2), groups with
// output_padding, and stride <= output_padding < dilation (the cropped path).
TEST(CudaConv, TransposedConvolutionMatchesCpu) {
  KILN_REQUIRE_CUDA();
  const kiln::testing::ScopedFlag no_tf32(set_allow_tf32_conv, allow_tf32_conv, false);
  const cudnn::ScopedMode mode(/*benchmark=*/false, /*deterministic=*/false);
  struct TransposeCase {
    std::vector<int64_t> input, weight;  // weight [C_in, C_out / groups, k...]
    std::vector<int64_t> stride, padding, output_padding, dilation;
    int64_t groups;
  };
  const std::vector<TransposeCase> cases = {
      {{2, 8, 4, 5, 3}, {8, 4, 2, 2, 2}, {2}, {0}, {0}, {1}, 1},
      {{2, 6, 5, 4}, {6, 2, 3, 3}, {2, 1}, {1, 0}, {1, 0}, {1, 2}, 3},
      {{1, 4, 9}, {4, 3, 3}, {1}, {1}, {2}, {3}, 1},
  };
  for (DType dtype : testing::kFloatingDTypes) {
    for (const TransposeCase& c : cases) {
      SCOPED_TRACE(::testing::PrintToString(c.input) + " * " + ::testing::PrintToString(c.weight) + " " +
                   std::string(dtype_name(dtype)));
      const Tensor x = testing::random_for(c.input, dtype, 21), w = testing::random_for(c.weight, dtype, 22);
      const Tensor b = testing::random_for({c.weight[1] * c.groups}, dtype, 23);
      const auto run = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
        return conv_transpose(xi, wi, bi, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
      };
      const Tensor cx = x.detach().requires_grad_(true), cw = w.detach().requires_grad_(true);
      const Tensor cb = b.detach().requires_grad_(true);
      const Tensor gx = testing::on_device(x, kCuda, /*strided=*/true).detach().requires_grad_(true);
      const Tensor gw = testing::on_device(w, kCuda).detach().requires_grad_(true);
      const Tensor gb = testing::on_device(b, kCuda).detach().requires_grad_(true);
      const Tensor cpu_y = run(cx, cw, cb), gpu_y = run(gx, gw, gb);
      ASSERT_EQ(gpu_y.sizes(), cpu_y.sizes());
      const int64_t kernel_volume = product(c.weight, 2);
      EXPECT_TRUE(testing::matches_cpu(gpu_y, cpu_y, slack_for(c.weight[0] / c.groups * kernel_volume)))
          << "forward";
      const Tensor dy = testing::random_for(cpu_y.sizes(), dtype, 24);
      mul(cpu_y, dy).sum().backward();
      mul(gpu_y, testing::on_device(dy, kCuda)).sum().backward();
      EXPECT_TRUE(testing::matches_cpu(gx.grad(), cx.grad(), slack_for(c.weight[1] * kernel_volume)))
          << "input gradient";
      const int64_t per_weight = c.input[0] * product(c.input, 2);
      EXPECT_TRUE(testing::matches_cpu(gw.grad(), cw.grad(), slack_for(per_weight))) << "weight gradient";
      EXPECT_TRUE(testing::matches_cpu(gb.grad(), cb.grad(), slack_for(product(cpu_y.sizes(), 2) * 2)))
          << "bias gradient";
    }
  }
}

// ---- the algorithm cache ----------------------------------------------------------------

struct Conv3dRun {
  Tensor x, w, y, dy, dx, dw;
  ConvParams params{.stride = {1, 1, 1}, .padding = {1, 1, 1}, .dilation = {1, 1, 1}, .groups = 1};

  explicit Conv3dRun(int64_t batch, DType dtype = DType::Float32) {
    x = testing::on_device(testing::random_for({batch, 8, 8, 8, 8}, dtype, 6), kCuda);
    w = testing::on_device(testing::random_for({16, 8, 3, 3, 3}, dtype, 7), kCuda);
    dy = testing::on_device(testing::random_for({batch, 16, 8, 8, 8}, dtype, 8), kCuda);
    y = empty({batch, 16, 8, 8, 8}, {.dtype = dtype, .device = kCuda});
    dx = empty(x.sizes(), {.dtype = dtype, .device = kCuda});
    dw = empty(w.sizes(), {.dtype = dtype, .device = kCuda});
  }
  void all_passes() const {
    backend(kCuda).conv_forward(x, w, params, y);
    backend(kCuda).conv_backward_input(dy, w, params, dx);
    backend(kCuda).conv_backward_weight(dy, x, params, dw);
  }
};

TEST(CudaConvAlgorithms, BenchmarkModeSearchesOncePerKey) {
  KILN_REQUIRE_CUDA();
  const cudnn::ScopedMode mode(/*benchmark=*/true, /*deterministic=*/false);
  cudnn::clear_algorithm_cache();
  cudnn::reset_stats();
  const Conv3dRun run(2);
  run.all_passes();
  run.all_passes();
  cudnn::Stats stats = cudnn::stats();
  for (const cudnn::PassStats* pass : {&stats.forward, &stats.backward_data, &stats.backward_filter}) {
    EXPECT_EQ(pass->finds, 1);
    EXPECT_EQ(pass->hits, 1);
    EXPECT_EQ(pass->heuristic_lookups, 0);
  }
  Conv3dRun(3).all_passes();  // another batch size: another key
  stats = cudnn::stats();
  EXPECT_EQ(stats.forward.finds, 2);
  EXPECT_EQ(stats.backward_data.finds, 2);
  EXPECT_EQ(stats.backward_filter.finds, 2);
}

// Note [A step's speed of light]: each key's calls since the reset, and the fastest time
// the search measured for it; heuristics measure nothing.
TEST(CudaConvAlgorithms, ConvUsesCountCallsAndKeepTheSearchesFastestTime) {
  KILN_REQUIRE_CUDA();
  cudnn::clear_algorithm_cache();
  {
    const cudnn::ScopedMode mode(/*benchmark=*/true, /*deterministic=*/false);
    const Conv3dRun run(2);
    run.all_passes();
    cudnn::reset_stats();
    run.all_passes();
    run.all_passes();
  }
  std::vector<cudnn::ConvUse> uses = cudnn::conv_uses();
  ASSERT_EQ(uses.size(), 3u);  // one key per pass
  for (const cudnn::ConvUse& use : uses) {
    EXPECT_EQ(use.calls, 2) << use.key;
    EXPECT_GT(use.fastest_ms, 0) << use.key;
    EXPECT_LT(use.fastest_ms, 1e4) << use.key;
  }
  cudnn::clear_algorithm_cache();
  {
    const cudnn::ScopedMode mode(/*benchmark=*/false, /*deterministic=*/false);
    Conv3dRun(2).all_passes();
  }
  uses = cudnn::conv_uses();
  ASSERT_EQ(uses.size(), 3u);
  for (const cudnn::ConvUse& use : uses) {
    EXPECT_EQ(use.calls, 1) << use.key;
    EXPECT_LT(use.fastest_ms, 0) << use.key;
  }
  cudnn::clear_algorithm_cache();
}

TEST(CudaConvAlgorithms, HeuristicsAreCachedAndTf32IsPartOfTheKey) {
  KILN_REQUIRE_CUDA();
  const cudnn::ScopedMode mode(/*benchmark=*/false, /*deterministic=*/false);
  cudnn::clear_algorithm_cache();
  cudnn::reset_stats();
  const Conv3dRun run(2);
  {
    const kiln::testing::ScopedFlag tf32(set_allow_tf32_conv, allow_tf32_conv, false);
    run.all_passes();
    run.all_passes();
  }
  {
    const kiln::testing::ScopedFlag tf32(set_allow_tf32_conv, allow_tf32_conv, true);
    run.all_passes();
  }
  const cudnn::Stats stats = cudnn::stats();
  EXPECT_EQ(stats.forward.heuristic_lookups, 2);
  EXPECT_EQ(stats.forward.hits, 1);
  EXPECT_EQ(stats.backward_filter.heuristic_lookups, 2);
  EXPECT_EQ(stats.forward.finds, 0);
}

TEST(CudaConvAlgorithms, DeterministicModeRepeatsBackwardFilterBitForBit) {
  KILN_REQUIRE_CUDA();
  for (bool benchmark : {false, true}) {
    const cudnn::ScopedMode mode(benchmark, /*deterministic=*/true);
    const Conv3dRun run(8);
    const Tensor first = empty(run.w.sizes(), {.dtype = DType::Float32, .device = kCuda});
    const Tensor second = empty(run.w.sizes(), {.dtype = DType::Float32, .device = kCuda});
    backend(kCuda).conv_backward_weight(run.dy, run.x, run.params, first);
    backend(kCuda).conv_backward_weight(run.dy, run.x, run.params, second);
    EXPECT_EQ(sub(first, second).abs().max().item<double>(), 0.0) << (benchmark ? "benchmark" : "heuristics");
  }
}

TEST(CudaConvAlgorithms, ASavedCacheLoadedAfterClearingSearchesNothing) {
  KILN_REQUIRE_CUDA();
  const cudnn::ScopedMode mode(/*benchmark=*/true, /*deterministic=*/false);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln_conv_algos_" + std::to_string(::getpid()) + ".txt");
  cudnn::clear_algorithm_cache();
  const Conv3dRun run(2, DType::Float16);
  run.all_passes();
  EXPECT_EQ(cudnn::save_algorithm_cache(path.string()).entries, 3);
  cudnn::clear_algorithm_cache();
  cudnn::reset_stats();
  const cudnn::LoadReport report = cudnn::load_algorithm_cache(path.string());
  std::filesystem::remove(path);
  EXPECT_TRUE(report.loaded) << report.message;
  EXPECT_EQ(report.entries, 3);
  run.all_passes();
  const cudnn::Stats stats = cudnn::stats();
  EXPECT_EQ(stats.forward.finds + stats.backward_data.finds + stats.backward_filter.finds, 0);
  EXPECT_EQ(stats.forward.hits + stats.backward_data.hits + stats.backward_filter.hits, 3);
}

// ---- without CUDA -----------------------------------------------------------------------

TEST(CudnnApi, SwitchesRoundTrip) {
  const cudnn::ScopedMode mode(/*benchmark=*/true, /*deterministic=*/true);
  EXPECT_TRUE(cudnn::benchmark());
  EXPECT_TRUE(cudnn::deterministic());
  cudnn::set_benchmark(false);
  EXPECT_FALSE(cudnn::benchmark());
}

TEST(CudnnApi, WithoutCudaTheCacheIsEmptyAndFilesAreRefusedWithTheReason) {
  if (cuda_is_available()) GTEST_SKIP() << "CUDA is available: this tests its absence";
  cudnn::clear_algorithm_cache();
  cudnn::reset_stats();
  const cudnn::Stats stats = cudnn::stats();
  EXPECT_EQ(stats.forward.finds + stats.forward.hits + stats.forward.heuristic_lookups, 0);
  EXPECT_EQ(stats.backward_filter.finds, 0);
  for (const auto& call : {+[] { cudnn::save_algorithm_cache("/tmp/never_written.txt"); },
                           +[] { cudnn::load_algorithm_cache("/tmp/never_read.txt"); }}) {
    try {
      call();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA is not available: "), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/never_written.txt"));
}

}  // namespace
}  // namespace kiln
