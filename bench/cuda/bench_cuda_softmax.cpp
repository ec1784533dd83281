// CUDA softmax (kernels/cuda/softmax.cu), forward and backward: logits [rows, 1000]
// (warp per row, row in registers), [rows, 32000] (block per row, online max-and-sum)
// and channel softmax over C of [N, C, D, H, W] (thread per position), in f32, f16, bf16.
//
// Roofline: forward reads x and writes y (warp path: one read; block path: two reads,
// the second mostly from L2 for rows that fit it), with ~2 exps per element: ~20 flops
// per element, 5 flops per f32 byte, under an H100's 18 flops per byte, so bandwidth
// bound. Backward reads g and y and writes grad_in. The rate counts the compulsory bytes
// (forward 2 x numel, backward 3 x numel, times the element size) against the same-run
// device copy peak (bench_cuda_util.h). Target: of_peak >= 0.8 at >= 16 MiB.
#include "bench/cuda/bench_cuda_util.h"
#include "core/backend.h"

namespace kiln::bench {
namespace {

const DType kDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16};

// args: shape kind (0: [rows, 1000], 1: [rows, 32000], 2: [N, 32, 16, 32, 32]),
// MiB of input, dtype index.
std::vector<int64_t> shape_of(int64_t kind, int64_t bytes, DType dtype) {
  const int64_t numel = bytes / static_cast<int64_t>(itemsize(dtype));
  if (kind == 0) return {std::max<int64_t>(1, numel / 1000), 1000};
  if (kind == 1) return {std::max<int64_t>(1, numel / 32000), 32000};
  return {std::max<int64_t>(1, numel / (32 * 16 * 32 * 32)), 32, 16, 32, 32};
}

// Softmax over the classes (dim 1 of [rows, classes]) or the channels (dim 1 of NCDHW).
int64_t dim_of(int64_t) { return 1; }

void BM_CudaSoftmaxForward(benchmark::State& state) {
  const DType dtype = kDTypes[state.range(2)];
  const Tensor x = ones(shape_of(state.range(0), state.range(1) << 20, dtype), {.dtype = dtype, .device = Device::cuda()});
  const Tensor y = empty_like(x);
  const double bytes = 2.0 * static_cast<double>(x.numel() * itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(x.device()).softmax(x, dim_of(state.range(0)), /*log=*/false, y); });
  state.SetLabel(std::string(dtype_name(dtype)) + (state.range(0) == 2 ? " channels" : " rows"));
}

void BM_CudaSoftmaxBackward(benchmark::State& state) {
  const DType dtype = kDTypes[state.range(2)];
  const Tensor y = ones(shape_of(state.range(0), state.range(1) << 20, dtype), {.dtype = dtype, .device = Device::cuda()});
  const Tensor g = ones_like(y);
  const Tensor gi = empty_like(y);
  const double bytes = 3.0 * static_cast<double>(y.numel() * itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(y.device()).softmax_backward(g, y, dim_of(state.range(0)), /*log=*/false, gi); });
  state.SetLabel(std::string(dtype_name(dtype)) + (state.range(0) == 2 ? " channels" : " rows"));
}

}  // namespace

void register_cuda_softmax_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaSoftmaxForward", BM_CudaSoftmaxForward)
      ->ArgsProduct({{0, 1, 2}, {16, 256}, {0, 1, 2}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaSoftmaxBackward", BM_CudaSoftmaxBackward)
      ->ArgsProduct({{0, 1, 2}, {16, 256}, {0, 1, 2}})
      ->UseManualTime();
}

}  // namespace kiln::bench
