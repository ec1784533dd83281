// Benchmark main: registers Kiln's backends, prints the measured copy peak, runs Google
// Benchmark.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "bench/bench_util.h"
#include "kernels/init.h"

int main(int argc, char** argv) {
  kiln::init();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("copy peak (memcpy, 256 MiB): %.2f GB/s\n", kiln::bench::copy_peak_bytes_per_second() / 1e9);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
