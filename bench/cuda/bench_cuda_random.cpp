// CUDA random kernels (kernels/cuda/random.cu): uniform and normal in float32, and
// randperm on the GPU against "randperm on the CPU + copy to the GPU" (the guide's point:
// make tensors where they are used).
//
// Roofline (H100 SXM: ~3.0 TB/s copy peak, ~67 TFLOP/s FP64, ~17 T int32 multiply-adds/s):
//   rand f32:  4 bytes written per element. One Philox4x32-10 block (10 rounds of two
//              32x32->64 multiplies plus xors and key bumps, ~60 integer instructions)
//              serves two elements: ~30 instructions per 4 bytes, ~25 T instr/s at the copy
//              peak, so uniform sits near the balance point: expect 60-90% of the peak.
//   randn f32: the same 4 bytes, plus Box-Muller in double (log, cos, sqrt: ~100 FP64
//              instructions per element): ~75 T FP64 op/s at the copy peak, above the FP64
//              rate, so normal is compute-bound: expect well under the bandwidth peak.
//   randperm:  keys (8n bytes) and values (8n) written, then CUB's onesweep radix sort of
//              64-bit keys with int64 values: 8 passes of 8 bits, each reading and writing
//              keys and values (32n bytes): ~272n bytes in all, reported as bytes/s against
//              the copy peak. The CPU path is a std::stable_sort (n log n comparisons on one
//              core) plus a pageable host-to-device copy of 8n bytes: orders of magnitude
//              slower from n = 1e6 on.
#include "bench/cuda/bench_cuda_util.h"

namespace kiln::bench {
namespace {

void BM_CudaRand_Float32(benchmark::State& state) {
  const int64_t n = state.range(0);
  Generator gen(1);
  run_cuda_benchmark(state, 4.0 * static_cast<double>(n), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    benchmark::DoNotOptimize(rand({n}, {.dtype = DType::Float32, .device = Device::cuda()}, &gen));
  });
}

void BM_CudaRandn_Float32(benchmark::State& state) {
  const int64_t n = state.range(0);
  Generator gen(1);
  run_cuda_benchmark(state, 4.0 * static_cast<double>(n), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    benchmark::DoNotOptimize(randn({n}, {.dtype = DType::Float32, .device = Device::cuda()}, &gen));
  });
}

// The bytes a radix sort of n (uint64 key, int64 value) pairs moves, with key generation.
double randperm_bytes(int64_t n) { return (16.0 + 8.0 * 32.0) * static_cast<double>(n); }

void BM_CudaRandperm_OnDevice(benchmark::State& state) {
  const int64_t n = state.range(0);
  Generator gen(1);
  run_cuda_benchmark(state, randperm_bytes(n), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    benchmark::DoNotOptimize(randperm(n, {.dtype = DType::Int64, .device = Device::cuda()}, &gen));
  });
  state.counters["items/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

// The pattern the guide warns against: make the permutation on the CPU, then copy it.
void BM_CudaRandperm_CpuThenCopy(benchmark::State& state) {
  const int64_t n = state.range(0);
  Generator gen(1);
  run_cuda_benchmark(state, randperm_bytes(n), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    benchmark::DoNotOptimize(randperm(n, {.dtype = DType::Int64}, &gen).to(Device::cuda()));
  });
  state.counters["items/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

void register_cuda_random_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaRand_Float32", BM_CudaRand_Float32)
      ->RangeMultiplier(16)
      ->Range(1 << 16, 1 << 28)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaRandn_Float32", BM_CudaRandn_Float32)
      ->RangeMultiplier(16)
      ->Range(1 << 16, 1 << 28)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaRandperm_OnDevice", BM_CudaRandperm_OnDevice)
      ->Arg(100000)
      ->Arg(1000000)
      ->Arg(10000000)
      ->Arg(100000000)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaRandperm_CpuThenCopy", BM_CudaRandperm_CpuThenCopy)
      ->Arg(100000)
      ->Arg(1000000)
      ->Arg(10000000)
      ->Arg(100000000)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace kiln::bench
