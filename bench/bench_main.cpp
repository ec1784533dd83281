// Benchmark main: registers Kiln's backends, registers the CUDA benchmarks when a GPU is
// there (otherwise prints one line saying why they are skipped: Google Benchmark 1.7 can
// only report a skip as an error, once per case), prints the measured copy peaks (host
// memcpy, and the device copy with a GPU), runs Google Benchmark. These notes go to
// standard error, beside Google Benchmark's own context lines, so that standard output
// is the report alone (--benchmark_format=json on stdout stays valid JSON).
#include <benchmark/benchmark.h>

#include <cstdio>

#include "bench/bench_util.h"
#if defined(KILN_WITH_CUDA)
#include "bench/cuda/bench_cuda_util.h"
#endif
#include "kiln/init.h"

int main(int argc, char** argv) {
  kiln::init();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::fprintf(stderr, "copy peak (memcpy, 256 MiB): %.2f GB/s\n",
               kiln::bench::copy_peak_bytes_per_second() / 1e9);
#if defined(KILN_WITH_CUDA)
  if (kiln::cuda_is_available()) {
    kiln::bench::register_cuda_benchmarks();
    std::fprintf(stderr, "CUDA copy peak (device to device, 512 MiB): %.2f GB/s\n",
                 kiln::bench::cuda_copy_peak_bytes_per_second() / 1e9);
  } else {
    std::fprintf(stderr, "CUDA benchmarks skipped: CUDA is not available: %s\n",
                 kiln::cuda_unavailable_reason().c_str());
  }
#else
  std::fprintf(
      stderr, "CUDA benchmarks skipped: this build has no CUDA backend (KILN_CUDA=OFF or no CUDA toolkit)\n");
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
