// CUDA reductions (kernels/cuda/reduce.cuh and reduce_*.cu): sum over the last dim and
// over the first dim of [rows, cols], a full sum, var_mean and argmax, in f32, f16 and
// bf16, from 1 MiB to 256 MiB of input.
//
// Roofline: a reduction reads its input once and writes a result per output, with one
// add (or a Welford update: ~6 flops; argmax: 2 compares) per element read, i.e. at most
// ~1.5 flops per byte for f32: far below an H100's ~60 TFLOP/s / 3.35 TB/s = 18 flops
// per byte, so it is bandwidth bound. Its time is bytes_read / DRAM bandwidth, and the
// reported rate counts bytes read + bytes written against the same-run device copy peak
// (bench_cuda_util.h). Target: of_peak >= 0.8 for every shape with >= 4 MiB of input.
// The 1 MiB cases are launch and tail bound (a few microseconds), and show it.
#include "bench/cuda/bench_cuda_util.h"
#include "core/backend.h"

namespace kiln::bench {
namespace {

const DType kDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16};

DType dtype_arg(int64_t i) { return kDTypes[i]; }

// [rows, cols] with `bytes` of input and `cols` columns.
std::vector<int64_t> matrix_of(int64_t bytes, DType dtype, int64_t cols) {
  const int64_t numel = bytes / static_cast<int64_t>(itemsize(dtype));
  return {std::max<int64_t>(1, numel / cols), cols};
}

double traffic(const Tensor& in, const Tensor& out) {
  return static_cast<double>(in.numel() * itemsize(in.dtype()) + out.numel() * itemsize(out.dtype()));
}

void label(benchmark::State& state, const Tensor& x) {
  state.SetLabel(std::string(dtype_name(x.dtype())) + " " + std::to_string(x.sizes()[0]) + "x" +
                 std::to_string(x.dim() > 1 ? x.sizes()[1] : 1));
}

// args: bytes of input, dtype index, reduced dim (0 or 1; 2 = all)
void BM_CudaSum(benchmark::State& state) {
  const DType dtype = dtype_arg(state.range(1));
  const Tensor x = ones(matrix_of(state.range(0), dtype, 4096), {.dtype = dtype, .device = Device::cuda()});
  const int64_t dim = state.range(2);
  const std::vector<int64_t> dims = dim == 2 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{dim};
  std::vector<int64_t> out_sizes = x.sizes();
  for (int64_t d : dims) out_sizes[d] = 1;
  const Tensor out = empty(out_sizes, {.dtype = dtype, .device = Device::cuda()});
  run_cuda_benchmark(state, traffic(x, out), "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(x.device()).reduce(ReduceOp::Sum, x, dims, out, {}); });
  label(state, x);
}

void BM_CudaVarMean(benchmark::State& state) {
  const DType dtype = dtype_arg(state.range(1));
  const Tensor x = ones(matrix_of(state.range(0), dtype, 4096), {.dtype = dtype, .device = Device::cuda()});
  const Tensor var = empty({x.sizes()[0], 1}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor mean = empty_like(var);
  run_cuda_benchmark(state, traffic(x, var) + static_cast<double>(mean.numel() * itemsize(dtype)), "bytes/s",
                     cuda_copy_peak_bytes_per_second(), [&] { backend(x.device()).var_mean(x, {1}, 1, var, mean); });
  label(state, x);
}

void BM_CudaArgmax(benchmark::State& state) {
  const DType dtype = dtype_arg(state.range(1));
  const Tensor x = ones(matrix_of(state.range(0), dtype, 4096), {.dtype = dtype, .device = Device::cuda()});
  const Tensor values = empty({x.sizes()[0], 1}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor indices = empty({x.sizes()[0], 1}, {.dtype = DType::Int64, .device = Device::cuda()});
  run_cuda_benchmark(state, traffic(x, values) + static_cast<double>(indices.numel() * 8), "bytes/s",
                     cuda_copy_peak_bytes_per_second(),
                     [&] { backend(x.device()).arg_reduce(ArgReduceOp::ArgMax, x, 1, values, indices); });
  label(state, x);
}

constexpr int64_t kMiB = 1 << 20;

}  // namespace

void register_cuda_reduce_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaSum", BM_CudaSum)
      ->ArgsProduct({{kMiB, 16 * kMiB, 64 * kMiB, 256 * kMiB}, {0, 1, 2}, {0, 1, 2}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaVarMean", BM_CudaVarMean)
      ->ArgsProduct({{kMiB, 64 * kMiB, 256 * kMiB}, {0, 1, 2}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaArgmax", BM_CudaArgmax)
      ->ArgsProduct({{kMiB, 64 * kMiB, 256 * kMiB}, {0, 1, 2}})
      ->UseManualTime();
}

}  // namespace kiln::bench
