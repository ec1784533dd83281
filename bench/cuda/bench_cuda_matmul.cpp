// cuBLAS GEMM through CudaBackend::bmm: FLOP/s for square sizes and for the GEMMs a 3D
// ResNet's convolutions amount to, in float32, TF32, float16 and bfloat16.
//
// Roofline: an M x N x K product does 2 M N K flops on (M K + K N + M N) elements, an
// arithmetic intensity of 2N/3 flops per element for a square N: at N = 1024 that is
// ~680 flops per element, ~340 per byte in f16 (~170 in f32), above an H100's f16 ridge
// point (~990 dense TFLOP/s over ~3.35 TB/s ~ 300 flops per byte; the f32 FMA ridge is
// ~20), and more so for the larger sizes, so these products are compute-bound and the
// ceiling is the tensor-core (or FMA) rate: H100 SXM dense ~67 TFLOP/s float32 (FMA),
// ~495 TF32, ~990 float16/bfloat16. Published peaks are rarely reached (clocks drop
// under load), so `of_peak` is the fraction of the best rate measured in the same run:
// an 8192^3 product of the same dtype and mode, best of five (gemm_peak_flops).
//
// The conv-as-GEMM shapes are those of a 3D ResNet-18 at batch 8 on 64^3 volumes
// (16^3, 8^3, 4^3, 2^3 positions in layers 1-4): M = batch x output positions,
// N = output channels, K = input channels x 27 (a 3x3x3 kernel). The product goes
// straight to backend(cuda).bmm with a preallocated output, so only the GEMM is timed.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/cuda/bench_cuda_util.h"
#include "core/backend.h"
#include "core/flags.h"

namespace kiln::bench {
namespace {

// A dtype and whether float32 may use TF32 tensor cores.
enum class GemmMode : int { kFloat32, kTf32, kFloat16, kBFloat16 };

DType dtype_of(GemmMode mode) {
  switch (mode) {
    case GemmMode::kFloat16: return DType::Float16;
    case GemmMode::kBFloat16: return DType::BFloat16;
    default: return DType::Float32;
  }
}

const char* name_of(GemmMode mode) {
  switch (mode) {
    case GemmMode::kFloat32: return "f32";
    case GemmMode::kTf32: return "tf32";
    case GemmMode::kFloat16: return "f16";
    default: return "bf16";
  }
}

// Sets the TF32 flag for the mode while alive and restores the previous setting.
class ModeGuard {
 public:
  explicit ModeGuard(GemmMode mode) : previous_(allow_tf32_matmul()) {
    set_allow_tf32_matmul(mode == GemmMode::kTf32);
  }
  ~ModeGuard() { set_allow_tf32_matmul(previous_); }
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  bool previous_;
};

// Operands and output of one [1, M, K] x [1, K, N] product on cuda:0.
struct GemmProblem {
  Tensor a, b, out;
  double flops;
  GemmProblem(int64_t m, int64_t n, int64_t k, DType dtype)
      : a(rand({1, m, k}, {.dtype = dtype, .device = Device::cuda()})),
        b(rand({1, k, n}, {.dtype = dtype, .device = Device::cuda()})),
        out(empty({1, m, n}, {.dtype = dtype, .device = Device::cuda()})),
        flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)) {}
  void run() const { backend(Device::cuda()).bmm(a, b, out); }
};

// FLOP/s of the best of five 8192^3 products in `mode`, measured once per mode.
double gemm_peak_flops(GemmMode mode) {
  static double peaks[4] = {0.0, 0.0, 0.0, 0.0};
  double& peak = peaks[static_cast<int>(mode)];
  if (peak > 0.0) return peak;
  const ModeGuard guard(mode);
  const GemmProblem problem(8192, 8192, 8192, dtype_of(mode));
  problem.run();  // warm-up: handle, workspace, cuBLAS's kernel choice
  for (int i = 0; i < 5; ++i) {
    flush_l2();
    const double ms = time_cuda_ms([&] { problem.run(); });
    peak = std::max(peak, problem.flops / (ms * 1e-3));
  }
  return peak;
}

void run_gemm(benchmark::State& state, GemmMode mode, int64_t m, int64_t n, int64_t k) {
  const double peak = gemm_peak_flops(mode);
  const ModeGuard guard(mode);
  const GemmProblem problem(m, n, k, dtype_of(mode));
  run_cuda_benchmark(state, problem.flops, "FLOP/s", peak, [&] { problem.run(); });
  state.SetLabel(std::string(name_of(mode)) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                 std::to_string(k));
}

// Args: mode, size.
void BM_CudaMatmul_Square(benchmark::State& state) {
  const int64_t n = state.range(1);
  run_gemm(state, static_cast<GemmMode>(state.range(0)), n, n, n);
}

// Args: mode, layer (1-4) of a 3D ResNet-18 at batch 8 on 64^3 volumes.
void BM_CudaMatmul_Resnet3dConv(benchmark::State& state) {
  const int64_t layer = state.range(1);
  const int64_t side = int64_t{32} >> layer;  // 16, 8, 4, 2
  const int64_t channels = int64_t{32} << layer;  // 64, 128, 256, 512
  run_gemm(state, static_cast<GemmMode>(state.range(0)), 8 * side * side * side, channels, channels * 27);
}

const std::vector<int64_t> kModes = {static_cast<int64_t>(GemmMode::kFloat32), static_cast<int64_t>(GemmMode::kTf32),
                                     static_cast<int64_t>(GemmMode::kFloat16),
                                     static_cast<int64_t>(GemmMode::kBFloat16)};

}  // namespace

void register_cuda_matmul_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaMatmul_Square", BM_CudaMatmul_Square)
      ->ArgsProduct({kModes, {1024, 2048, 4096, 8192}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaMatmul_Resnet3dConv", BM_CudaMatmul_Resnet3dConv)
      ->ArgsProduct({kModes, {1, 2, 3, 4}})
      ->UseManualTime();
}

}  // namespace kiln::bench
