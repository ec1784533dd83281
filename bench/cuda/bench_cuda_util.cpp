// CUDA benchmark helpers (see bench_cuda_util.h).
#include "bench/cuda/bench_cuda_util.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/event.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/stream.h"

namespace kiln::bench {

void register_cuda_benchmarks() {
  register_cuda_batch_norm_benchmarks();
  register_cuda_conv_benchmarks();
  register_cuda_copy_benchmarks();
  register_cuda_elementwise_benchmarks();
  register_cuda_matmul_benchmarks();
  register_cuda_index_benchmarks();
  register_cuda_optim_benchmarks();
  register_cuda_pool_benchmarks();
  register_cuda_random_benchmarks();
  register_cuda_reduce_benchmarks();
  register_cuda_softmax_benchmarks();
}

double time_cuda_ms(const std::function<void()>& body) {
  const cuda::Stream stream = cuda::current_stream(0);
  cuda::Event start(/*enable_timing=*/true), stop(/*enable_timing=*/true);
  start.record(stream);
  body();
  stop.record(stream);
  stop.synchronize();
  return stop.elapsed_ms_since(start);
}

double cuda_copy_peak_bytes_per_second() {
  static const double peak = [] {
    constexpr size_t kBytes = size_t{512} << 20;
    const Tensor src = empty({static_cast<int64_t>(kBytes)}, {.dtype = DType::UInt8, .device = Device::cuda()});
    const Tensor dst = empty_like(src);
    const cuda::Stream stream = cuda::current_stream(0);
    double best = 0.0;
    for (int i = 0; i < 10; ++i) {
      const double ms = time_cuda_ms([&] {
        KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), kBytes, cudaMemcpyDeviceToDevice,
                                        stream.handle()));
      });
      best = std::max(best, 2.0 * static_cast<double>(kBytes) / (ms * 1e-3));
    }
    return best;
  }();
  return peak;
}

void flush_l2() {
  static const Tensor scratch = [] {
    const int64_t bytes = 2 * static_cast<int64_t>(std::max(cuda::device_properties(0).l2_cache_bytes, 1 << 20));
    return empty({bytes}, {.dtype = DType::UInt8, .device = Device::cuda()});
  }();
  const cuda::Stream stream = cuda::current_stream(0);
  KILN_CUDA_CHECK(cudaMemsetAsync(scratch.data_ptr(), 0, static_cast<size_t>(scratch.numel()), stream.handle()));
  stream.synchronize();
}

void run_cuda_benchmark(benchmark::State& state, double amount_per_iteration, const std::string& rate_name,
                        double peak, const std::function<void()>& body) {
  body();  // warm-up: first-call costs (handles, caches, allocations) stay out of the timing
  synchronize(Device::cuda());
  double total_seconds = 0.0;
  for (auto _ : state) {
    flush_l2();
    const double seconds = time_cuda_ms(body) * 1e-3;
    state.SetIterationTime(seconds);
    total_seconds += seconds;
  }
  if (total_seconds <= 0.0) return;
  const double rate = amount_per_iteration * static_cast<double>(state.iterations()) / total_seconds;
  state.counters[rate_name] = rate;
  if (peak > 0.0) state.counters["of_peak"] = rate / peak;
}

}  // namespace kiln::bench
