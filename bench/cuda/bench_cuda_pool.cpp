// CUDA pooling (kernels/cuda/pool.cu) on 3D-CNN shapes, forward and backward, in f32 and
// f16: max_pool3d 3x3x3 stride 2 padding 1 (a ResNet stem's), avg_pool3d 2x2x2 (stride 2)
// and adaptive_avg_pool3d to 1x1x1 (global pooling), on [8, 64, 32, 32, 32] (an early
// stage) and [8, 512, 4, 4, 4] (the last stage).
//
// Roofline: under one flop per byte (27 compares per output of the max pool, one add per
// input element of the average), so bandwidth-bound; the ceiling is the device copy peak
// measured in the same run (bench_cuda_util.h). Compulsory bytes: forward reads the input
// and writes the output (+ 8-byte indices for max); backward reads grad_out (+ the
// indices) and writes grad_in. The backward gathers read each grad_out element once per
// window holding the input element (up to 8 for the max pool), mostly from L1/L2, which
// the count leaves out. Global pooling of [8, 64, 32^3] has only 512 outputs: one thread
// per output cannot fill the GPU there, which this benchmark shows.
#include "bench/cuda/bench_cuda_util.h"
#include "core/backend.h"
#include "bench/pool_cases.h"

namespace kiln::bench {
namespace {

const DType kDTypes[] = {DType::Float32, DType::Float16};

std::string label_of(int64_t pool, DType dtype) {
  return std::string(pool == kMax ? "max 3x3x3 s2 p1 " : pool == kAvg ? "avg 2x2x2 " : "adaptive 1 ") +
         std::string(dtype_name(dtype));
}

// args: pool kind, shape index, dtype index.
void BM_CudaPoolForward(benchmark::State& state) {
  const int64_t pool = state.range(0);
  const std::vector<int64_t>& in = kPoolShapes[state.range(1)];
  const DType dtype = kDTypes[state.range(2)];
  const TensorOptions options = {.dtype = dtype, .device = Device::cuda()};
  const Tensor x = ones(in, options);
  const Tensor y = empty(pool_output_of(pool, in), options);
  const Tensor idx = empty(y.sizes(), {.dtype = DType::Int64, .device = Device::cuda()});
  Backend& gpu = backend(x.device());
  const double bytes = static_cast<double>((x.numel() + y.numel()) * itemsize(dtype)) +
                       (pool == kMax ? 8.0 * static_cast<double>(y.numel()) : 0.0);
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    if (pool == kMax) gpu.max_pool_forward(x, pool_params_of(pool), y, idx);
    if (pool == kAvg) gpu.avg_pool_forward(x, pool_params_of(pool), y);
    if (pool == kAdaptive) gpu.adaptive_avg_pool_forward(x, y);
  });
  state.SetLabel(label_of(pool, dtype));
}

void BM_CudaPoolBackward(benchmark::State& state) {
  const int64_t pool = state.range(0);
  const std::vector<int64_t>& in = kPoolShapes[state.range(1)];
  const DType dtype = kDTypes[state.range(2)];
  const TensorOptions options = {.dtype = dtype, .device = Device::cuda()};
  const Tensor gx = empty(in, options);
  const Tensor gy = ones(pool_output_of(pool, in), options);
  const Tensor idx = empty(gy.sizes(), {.dtype = DType::Int64, .device = Device::cuda()});
  Backend& gpu = backend(gx.device());
  if (pool == kMax) gpu.max_pool_forward(rand(in).to(Device::cuda(), dtype), pool_params_of(pool), empty_like(gy), idx);
  const double bytes = static_cast<double>((gx.numel() + gy.numel()) * itemsize(dtype)) +
                       (pool == kMax ? 8.0 * static_cast<double>(gy.numel()) : 0.0);
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    if (pool == kMax) gpu.max_pool_backward(gy, idx, pool_params_of(pool), gx);
    if (pool == kAvg) gpu.avg_pool_backward(gy, pool_params_of(pool), gx);
    if (pool == kAdaptive) gpu.adaptive_avg_pool_backward(gy, gx);
  });
  state.SetLabel(label_of(pool, dtype));
}

}  // namespace

void register_cuda_pool_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaPoolForward", BM_CudaPoolForward)
      ->ArgsProduct({{kMax, kAvg, kAdaptive}, {0, 1}, {0, 1}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaPoolBackward", BM_CudaPoolBackward)
      ->ArgsProduct({{kMax, kAvg, kAdaptive}, {0, 1}, {0, 1}})
      ->UseManualTime();
}

}  // namespace kiln::bench
