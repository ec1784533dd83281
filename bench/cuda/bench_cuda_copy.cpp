// The device copy peak itself, as a benchmark: device-to-device cudaMemcpyAsync from
// 1 MiB to 1 GiB (bytes/s with read + write counted, of_peak against the 512 MiB peak of
// bench_cuda_util.h), and host<->device copies from pinned and from pageable memory
// (PCIe/NVLink-C2C bound: the numbers show why the loader pins its batches).
#include <cuda_runtime_api.h>

#include "bench/cuda/bench_cuda_util.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace kiln::bench {
namespace {

void BM_CudaCopy_DeviceToDevice(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const Tensor src = empty({bytes}, {.dtype = DType::UInt8, .device = Device::cuda()});
  const Tensor dst = empty_like(src);
  run_cuda_benchmark(state, 2.0 * static_cast<double>(bytes), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), static_cast<size_t>(bytes),
                                    cudaMemcpyDeviceToDevice, cuda::current_stream(0).handle()));
  });
}

// Through Kiln's copy_ (the backend's copy path), host -> device, pinned or pageable source.
void BM_CudaCopy_HostToDevice(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const bool pinned = state.range(1) != 0;
  const Tensor host = zeros({bytes}, {.dtype = DType::UInt8, .pin_memory = pinned});
  Tensor device = empty({bytes}, {.dtype = DType::UInt8, .device = Device::cuda()});
  NoGradGuard no_grad;
  run_cuda_benchmark(state, static_cast<double>(bytes), "bytes/s", 0.0,
                     [&] { device.copy_(host, /*non_blocking=*/pinned); });
  state.SetLabel(pinned ? "pinned" : "pageable");
}

void BM_CudaCopy_DeviceToHost(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const bool pinned = state.range(1) != 0;
  Tensor host = zeros({bytes}, {.dtype = DType::UInt8, .pin_memory = pinned});
  const Tensor device = zeros({bytes}, {.dtype = DType::UInt8, .device = Device::cuda()});
  NoGradGuard no_grad;
  run_cuda_benchmark(state, static_cast<double>(bytes), "bytes/s", 0.0,
                     [&] { host.copy_(device, /*non_blocking=*/pinned); });
  state.SetLabel(pinned ? "pinned" : "pageable");
}

}  // namespace

void register_cuda_copy_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaCopy_DeviceToDevice", BM_CudaCopy_DeviceToDevice)
      ->RangeMultiplier(8)
      ->Range(1 << 20, 1 << 30)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaCopy_HostToDevice", BM_CudaCopy_HostToDevice)
      ->ArgsProduct({{1 << 20, 64 << 20}, {0, 1}})
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaCopy_DeviceToHost", BM_CudaCopy_DeviceToHost)
      ->ArgsProduct({{1 << 20, 64 << 20}, {0, 1}})
      ->UseManualTime();
}

}  // namespace kiln::bench
