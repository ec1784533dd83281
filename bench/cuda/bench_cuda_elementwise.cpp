// The CUDA elementwise engine against the device's copy bandwidth.
//
// Roofline: elementwise ops do O(1) flops per element and are bound by memory traffic.
// Bytes moved per element = sizeof(out) + sum of sizeof(inputs) read once each:
//   relu, exp (unary)          2 * s       (s = 4 for f32, 2 for f16/bf16)
//   add (binary)               3 * s
//   add with a row broadcast   2 * s       (the [1, C] row stays in L2; counted as 0)
//   transposed copy            2 * s       (strided reads, coalesced writes)
//   cast f32 -> f16            4 + 2 = 6;  f16 -> f32: 2 + 4 = 6
// An H100 SXM's HBM3 peak is ~3.35 TB/s by spec; the reachable peak is the same-run
// device-to-device copy (cuda_copy_peak_bytes_per_second, read + write counted), and
// the target is of_peak >= 0.9 from 64 MiB per operand on. Sizes run 1 MiB..256 MiB per
// operand, so the small ones show launch overhead and L2 effects.
#include <cmath>
#include <string>

#include "bench/cuda/bench_cuda_util.h"

namespace kiln::bench {
namespace {

DType dtype_arg(int64_t code) { return static_cast<DType>(code); }

int64_t elements_for(int64_t bytes_per_operand, DType dtype) {
  return bytes_per_operand / static_cast<int64_t>(itemsize(dtype));
}

void BM_CudaElementwise_Unary(benchmark::State& state, UnaryOp op) {
  const DType dtype = dtype_arg(state.range(1));
  const int64_t n = elements_for(state.range(0), dtype);
  const Tensor in = ones({n}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor out = empty_like(in);
  const double bytes = 2.0 * static_cast<double>(n) * static_cast<double>(itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(Device::cuda()).unary(op, in, out, ElementwiseParams{}); });
  state.SetLabel(std::string(dtype_name(dtype)));
}

void BM_CudaElementwise_Relu(benchmark::State& state) { BM_CudaElementwise_Unary(state, UnaryOp::Relu); }
void BM_CudaElementwise_Exp(benchmark::State& state) { BM_CudaElementwise_Unary(state, UnaryOp::Exp); }

void BM_CudaElementwise_Add(benchmark::State& state) {
  const DType dtype = dtype_arg(state.range(1));
  const int64_t n = elements_for(state.range(0), dtype);
  const Tensor a = ones({n}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor b = ones({n}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor out = empty_like(a);
  const double bytes = 3.0 * static_cast<double>(n) * static_cast<double>(itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(Device::cuda()).binary(BinaryOp::Add, a, b, out, ElementwiseParams{}); });
  state.SetLabel(std::string(dtype_name(dtype)));
}

// [R, 1024] + [1, 1024] expanded: the strided kernel with a stride-0 operand.
void BM_CudaElementwise_AddRowBroadcast(benchmark::State& state) {
  const DType dtype = dtype_arg(state.range(1));
  const int64_t cols = 1024, rows = elements_for(state.range(0), dtype) / cols;
  const Tensor a = ones({rows, cols}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor row = ones({1, cols}, {.dtype = dtype, .device = Device::cuda()}).expand({rows, cols});
  const Tensor out = empty_like(a);
  const double bytes = 2.0 * static_cast<double>(rows * cols) * static_cast<double>(itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(Device::cuda()).binary(BinaryOp::Add, a, row, out, ElementwiseParams{}); });
  state.SetLabel(std::string(dtype_name(dtype)));
}

// out = in.t() made contiguous: strided reads through the offset calculator.
void BM_CudaElementwise_TransposedCopy(benchmark::State& state) {
  const DType dtype = dtype_arg(state.range(1));
  const int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(elements_for(state.range(0), dtype))));
  const Tensor in = ones({side, side}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor out = empty({side, side}, {.dtype = dtype, .device = Device::cuda()});
  const Tensor transposed = in.t();
  const double bytes = 2.0 * static_cast<double>(side * side) * static_cast<double>(itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(Device::cuda()).copy(transposed, out, false); });
  state.SetLabel(std::string(dtype_name(dtype)));
}

// Casts: range(1) is the source dtype, range(2) the destination's.
void BM_CudaElementwise_Cast(benchmark::State& state) {
  const DType from = dtype_arg(state.range(1)), to = dtype_arg(state.range(2));
  const int64_t n = elements_for(state.range(0), DType::Float32);
  const Tensor in = ones({n}, {.dtype = from, .device = Device::cuda()});
  const Tensor out = empty({n}, {.dtype = to, .device = Device::cuda()});
  const double bytes = static_cast<double>(n) * static_cast<double>(itemsize(from) + itemsize(to));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { backend(Device::cuda()).copy(in, out, false); });
  state.SetLabel(std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)));
}

const int64_t kF32 = static_cast<int64_t>(DType::Float32);
const int64_t kF16 = static_cast<int64_t>(DType::Float16);
const int64_t kBF16 = static_cast<int64_t>(DType::BFloat16);
const std::vector<int64_t> kBytesPerOperand = {1 << 20, 16 << 20, 64 << 20, 256 << 20};

}  // namespace

void register_cuda_elementwise_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaElementwise_Relu", BM_CudaElementwise_Relu)
      ->ArgsProduct({kBytesPerOperand, {kF32, kF16, kBF16}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaElementwise_Exp", BM_CudaElementwise_Exp)
      ->ArgsProduct({kBytesPerOperand, {kF32, kF16, kBF16}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaElementwise_Add", BM_CudaElementwise_Add)
      ->ArgsProduct({kBytesPerOperand, {kF32, kF16, kBF16}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaElementwise_AddRowBroadcast", BM_CudaElementwise_AddRowBroadcast)
      ->ArgsProduct({kBytesPerOperand, {kF32, kF16}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaElementwise_TransposedCopy", BM_CudaElementwise_TransposedCopy)
      ->ArgsProduct({kBytesPerOperand, {kF32, kF16}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaElementwise_Cast", BM_CudaElementwise_Cast)
      ->ArgsProduct({kBytesPerOperand, {kF32}, {kF16}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaElementwise_Cast", BM_CudaElementwise_Cast)
      ->ArgsProduct({kBytesPerOperand, {kF16}, {kF32}})
      ->UseManualTime();
}

}  // namespace kiln::bench
