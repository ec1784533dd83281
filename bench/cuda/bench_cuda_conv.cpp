// cuDNN conv3d through CudaBackend: forward, backward-data and backward-filter for every
// convolution shape of a 3D ResNet-18 on 28^3 (MedMNIST 3D) and 64^3 volumes at batch 8,
// in float32, TF32 and float16, with cuDNN's heuristics and in benchmark mode
// (kiln::cudnn::set_benchmark), reporting FLOP/s.
//
// FLOPs: each pass of a convolution does the same multiply-adds,
// 2 N C_out prod(o) (C_in / groups) prod(k) flops. Roofline: a 3x3x3 convolution at
// C_in = C_out = 64 reads ~(C_in + C_out) values per output position and does
// 2 * 64 * 27 * 64 ~ 221k flops for 64 outputs: ~1700 flops per element, compute-bound on
// an H100/H200 in every dtype (f16 ridge ~300 flops/byte); the stem (C_in = 1) and the
// 1x1x1 downsamples (K = C_in) do far fewer flops per byte and sit nearer the bandwidth
// roof. So `of_peak` is the fraction of the GEMM rate of the same dtype and mode measured
// in the same run (an 8192^3 bmm, best of five), the rate an implicit-GEMM convolution
// can at best approach.
//
// ResNet-18 (3D): stem 7x7x7 stride 2 (1 -> 64) then a stride-2 max pool, so layer 1 runs
// at S/4; layers 2-4 halve the size (a stride-2 3x3x3 conv and a stride-2 1x1x1
// downsample on the shortcut) and double the channels (64, 128, 256, 512).
// Args: layer (kLayers below), volume side (28 or 64), mode, pass, benchmark mode (0/1).
#include <algorithm>
#include <string>
#include <vector>

#include "bench/cuda/bench_cuda_util.h"
#include "core/backend.h"
#include "core/cudnn.h"
#include "core/flags.h"

namespace kiln::bench {
namespace {

enum class ConvMode : int { kFloat32, kTf32, kFloat16 };
enum class Pass : int { kForward, kBackwardData, kBackwardFilter };

DType dtype_of(ConvMode mode) { return mode == ConvMode::kFloat16 ? DType::Float16 : DType::Float32; }
const char* name_of(ConvMode mode) {
  return mode == ConvMode::kFloat32 ? "f32" : mode == ConvMode::kTf32 ? "tf32" : "f16";
}
const char* name_of(Pass pass) {
  return pass == Pass::kForward ? "fwd" : pass == Pass::kBackwardData ? "bwd_data" : "bwd_filter";
}

// Sets both TF32 switches (the GEMM peak and the conv) and cuDNN's benchmark mode while
// alive, and restores them.
class ModeGuard {
 public:
  ModeGuard(ConvMode mode, bool benchmark)
      : matmul_(allow_tf32_matmul()), conv_(allow_tf32_conv()), cudnn_(benchmark, cudnn::deterministic()) {
    set_allow_tf32_matmul(mode == ConvMode::kTf32);
    set_allow_tf32_conv(mode == ConvMode::kTf32);
  }
  ~ModeGuard() {
    set_allow_tf32_matmul(matmul_);
    set_allow_tf32_conv(conv_);
  }
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  bool matmul_, conv_;
  cudnn::ScopedMode cudnn_;
};

// One convolution layer: channels in/out, kernel side, stride, and the input side as a
// function of the volume side S (S / divisor, rounded up as the strided layers round).
struct Layer {
  const char* name;
  int64_t c_in, c_out, kernel, stride, divisor;
};

// Input sides: stem S; layer1 S/4; a stage's first conv and downsample read the previous
// stage's size; its second conv reads its own.
const std::vector<Layer> kLayers = {
    {"stem7s2", 1, 64, 7, 2, 1},          {"l1_3x3", 64, 64, 3, 1, 4},
    {"l2_3x3s2", 64, 128, 3, 2, 4},       {"l2_3x3", 128, 128, 3, 1, 8},   {"l2_down1s2", 64, 128, 1, 2, 4},
    {"l3_3x3s2", 128, 256, 3, 2, 8},      {"l3_3x3", 256, 256, 3, 1, 16},  {"l3_down1s2", 128, 256, 1, 2, 8},
    {"l4_3x3s2", 256, 512, 3, 2, 16},     {"l4_3x3", 512, 512, 3, 1, 32},  {"l4_down1s2", 256, 512, 1, 2, 16},
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct ConvProblem {
  Tensor x, w, y;
  ConvParams params;
  double flops;

  ConvProblem(const Layer& layer, int64_t volume, DType dtype) {
    constexpr int64_t kBatch = 8;
    const int64_t side = ceil_div(volume, layer.divisor);
    const int64_t pad = layer.kernel / 2;
    const int64_t out = (side + 2 * pad - layer.kernel) / layer.stride + 1;
    const Device cuda = Device::cuda();
    x = rand({kBatch, layer.c_in, side, side, side}, {.dtype = dtype, .device = cuda});
    w = rand({layer.c_out, layer.c_in, layer.kernel, layer.kernel, layer.kernel}, {.dtype = dtype, .device = cuda});
    y = rand({kBatch, layer.c_out, out, out, out}, {.dtype = dtype, .device = cuda});
    params = {.stride = std::vector<int64_t>(3, layer.stride), .padding = std::vector<int64_t>(3, pad),
              .dilation = {1, 1, 1}, .groups = 1};
    flops = 2.0 * kBatch * layer.c_out * static_cast<double>(out * out * out) * layer.c_in *
            static_cast<double>(layer.kernel * layer.kernel * layer.kernel);
  }

  // Writes y (forward), x (backward-data: the input gradient) or w (backward-filter).
  void run(Pass pass) const {
    Backend& cuda = backend(Device::cuda());
    switch (pass) {
      case Pass::kForward: cuda.conv_forward(x, w, params, y); break;
      case Pass::kBackwardData: cuda.conv_backward_input(y, w, params, x); break;
      case Pass::kBackwardFilter: cuda.conv_backward_weight(y, x, params, w); break;
    }
  }
};

// FLOP/s of the best of five 8192^3 bmm in the mode's dtype, measured once per mode.
double gemm_peak_flops(ConvMode mode) {
  static double peaks[3] = {0.0, 0.0, 0.0};
  double& peak = peaks[static_cast<int>(mode)];
  if (peak > 0.0) return peak;
  const ModeGuard guard(mode, /*benchmark=*/false);
  const DType dtype = dtype_of(mode);
  const Tensor a = rand({1, 8192, 8192}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor b = rand({1, 8192, 8192}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor out = empty({1, 8192, 8192}, {.dtype = dtype, .device = Device::cuda()});
  backend(Device::cuda()).bmm(a, b, out);  // warm-up
  for (int i = 0; i < 5; ++i) {
    flush_l2();
    const double ms = time_cuda_ms([&] { backend(Device::cuda()).bmm(a, b, out); });
    peak = std::max(peak, 2.0 * 8192.0 * 8192.0 * 8192.0 / (ms * 1e-3));
  }
  return peak;
}

void BM_CudaConv3d_Resnet18(benchmark::State& state) {
  const Layer& layer = kLayers[static_cast<size_t>(state.range(0))];
  const int64_t volume = state.range(1);
  const auto mode = static_cast<ConvMode>(state.range(2));
  const auto pass = static_cast<Pass>(state.range(3));
  const bool benchmark_mode = state.range(4) != 0;
  const double peak = gemm_peak_flops(mode);
  const ModeGuard guard(mode, benchmark_mode);
  // A searched entry would answer a later heuristic run of the same key: start afresh.
  cudnn::clear_algorithm_cache();
  const ConvProblem problem(layer, volume, dtype_of(mode));
  problem.run(pass);  // warm-up: handle, and the heuristic lookup or the search (untimed)
  run_cuda_benchmark(state, problem.flops, "FLOP/s", peak, [&] { problem.run(pass); });
  state.SetLabel(std::string(layer.name) + " " + std::to_string(volume) + "^3 " + name_of(mode) + " " +
                 name_of(pass) + (benchmark_mode ? " benchmark" : " heuristics"));
}

}  // namespace

void register_cuda_conv_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaConv3d_Resnet18", BM_CudaConv3d_Resnet18)
      ->ArgsProduct({benchmark::CreateDenseRange(0, static_cast<int64_t>(kLayers.size()) - 1, 1),
                     {28, 64},
                     {0, 1, 2},
                     {0, 1, 2},
                     {0, 1}})
      ->UseManualTime();
}

}  // namespace kiln::bench
