// CPU 3-d convolution (vol2col + Eigen GEMM, kernels/cpu/conv.cpp): forward,
// backward-input and backward-weight, float32, batch 2, on the convolutions of a 3-d
// ResNet-18 (stem 7x7x7 stride 2; 3x3x3 convs at 64/128/256/512 channels, the spatial size
// halving per stage after the stem's stride and the max pool; 1x1x1 stride-2 downsamples)
// for a 28^3 volume (MedMNIST 3D), plus the stem and first stage of a 64^3 volume. The
// Backend kernels are timed directly, on contiguous operands allocated outside the loop.
//
// FLOPs per pass = 2 N C_out prod(o) (C_in / groups) prod(k): the three passes are the
// same products rearranged, so they report comparable FLOP/s.
//
// Roofline: per (sample, group) each pass is one GEMM of C_out x R x O (R = C_in prod(k)
// rows of the column matrix, O = prod(o) output positions) plus the column matrix itself:
// vol2col writes R x O floats and the GEMM reads them once, 8 R O bytes for 2 C_out R O
// flops, so the column traffic alone has an intensity of C_out / 4 flop/byte: 16 at
// C_out = 64, 128 at 512. Against ~27 GB/s of memory bandwidth that is a ceiling of at
// least ~430 GFLOP/s, far above the compute peak of two AVX2 cores (2 x 8 lanes x 2 FMA x
// ~3 GHz ~ 96 GFLOP/s float32, and ~40 GFLOP/s is what Eigen's GEMM reaches here in
// bench_matmul; "of_gemm" is the fraction of a plain GEMM's rate measured in the same run),
// and the tiles (Note [Column tiles]) stay within the L3 cache anyway.
// So the stem and the early stages are compute-bound and should run near the GEMM's rate.
// The late stages are not: at 28^3 stage 4 has O = 1 output position per sample, so its
// GEMM is a matrix-vector product that reads the whole weight (512 x 13824 floats =
// 28 MB) for 2 flops per 4 bytes: memory-bound at ~0.5 flop/byte, i.e. ~13 GFLOP/s.

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench/bench_util.h"
#include "core/backend.h"
#include "core/ops.h"

namespace kiln::bench {
namespace {

constexpr int64_t kBatch = 2;

struct ConvShape {
  const char* name;
  int64_t c_in, c_out, size, kernel, stride, padding;  // input size^3, kernel^3
};

constexpr ConvShape kShapes[] = {
    {"28^3 stem 1->64 k7 s2", 1, 64, 28, 7, 2, 3},
    {"28^3 stem 3->64 k7 s2", 3, 64, 28, 7, 2, 3},
    {"28^3 layer1 64->64 k3 @7", 64, 64, 7, 3, 1, 1},
    {"28^3 layer2 64->128 k3 s2 @7", 64, 128, 7, 3, 2, 1},
    {"28^3 layer2 128->128 k3 @4", 128, 128, 4, 3, 1, 1},
    {"28^3 layer2 down 64->128 k1 s2 @7", 64, 128, 7, 1, 2, 0},
    {"28^3 layer3 128->256 k3 s2 @4", 128, 256, 4, 3, 2, 1},
    {"28^3 layer3 256->256 k3 @2", 256, 256, 2, 3, 1, 1},
    {"28^3 layer3 down 128->256 k1 s2 @4", 128, 256, 4, 1, 2, 0},
    {"28^3 layer4 256->512 k3 s2 @2", 256, 512, 2, 3, 2, 1},
    {"28^3 layer4 512->512 k3 @1", 512, 512, 1, 3, 1, 1},
    {"28^3 layer4 down 256->512 k1 s2 @2", 256, 512, 2, 1, 2, 0},
    {"64^3 stem 1->64 k7 s2", 1, 64, 64, 7, 2, 3},
    {"64^3 layer1 64->64 k3 @16", 64, 64, 16, 3, 1, 1},
};
constexpr int64_t kShapeCount = sizeof(kShapes) / sizeof(kShapes[0]);

enum class ConvPass { Forward, BackwardInput, BackwardWeight };

int64_t output_size(const ConvShape& s) { return (s.size + 2 * s.padding - s.kernel) / s.stride + 1; }

double conv_flops(const ConvShape& s) {
  const double o = static_cast<double>(output_size(s)), k = static_cast<double>(s.kernel);
  return 2.0 * kBatch * static_cast<double>(s.c_out) * o * o * o * static_cast<double>(s.c_in) * k * k * k;
}

// The float32 rate of a plain 1024^3 GEMM through the same Eigen product (best of 3),
// measured once per process: the ceiling of a vol2col + GEMM convolution on this machine
// under this run's conditions, reported as "of_gemm" beside each figure.
double gemm_peak_flops_per_second() {
  static const double peak = [] {
    constexpr int64_t n = 1024;
    const Tensor a = rand({n, n}), b = rand({n, n});
    double best = 0;
    for (int i = 0; i < 3; ++i) {
      const auto start = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(matmul(a, b).data_ptr());
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::max(best, 2.0 * n * n * n / seconds);
    }
    std::fprintf(stderr, "GEMM peak (float32 1024^3 matmul, best of 3): %.2f GFLOP/s\n", best / 1e9);
    return best;
  }();
  return peak;
}

template <ConvPass kPass>
void BM_Conv3d(benchmark::State& state) {
  const ConvShape& s = kShapes[state.range(0)];
  const int64_t o = output_size(s);
  const Tensor input = rand({kBatch, s.c_in, s.size, s.size, s.size});
  const Tensor weight = rand({s.c_out, s.c_in, s.kernel, s.kernel, s.kernel});
  const Tensor output = rand({kBatch, s.c_out, o, o, o});  // forward's result, or grad_out
  const Tensor grad_input = empty(input.sizes()), grad_weight = empty(weight.sizes());
  const ConvParams params{.stride = {s.stride, s.stride, s.stride},
                          .padding = {s.padding, s.padding, s.padding},
                          .dilation = {1, 1, 1},
                          .groups = 1};
  Backend& cpu = backend(Device::cpu());
  const double peak = gemm_peak_flops_per_second();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if constexpr (kPass == ConvPass::Forward) {
      cpu.conv_forward(input, weight, params, output);
    } else if constexpr (kPass == ConvPass::BackwardInput) {
      cpu.conv_backward_input(output, weight, params, grad_input);
    } else {
      cpu.conv_backward_weight(output, input, params, grad_weight);
    }
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops = conv_flops(s) * static_cast<double>(state.iterations());
  state.SetLabel(s.name);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["of_gemm"] = flops / seconds / peak;
}

BENCHMARK_TEMPLATE(BM_Conv3d, ConvPass::Forward)->DenseRange(0, kShapeCount - 1)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Conv3d, ConvPass::BackwardInput)->DenseRange(0, kShapeCount - 1)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Conv3d, ConvPass::BackwardWeight)->DenseRange(0, kShapeCount - 1)->UseRealTime();

}  // namespace
}  // namespace kiln::bench
