// Shared pieces of Kiln's CPU benchmarks: the copy-bandwidth peak measured in the same
// run, and the counters every benchmark reports.
//
// Roofline on the CPU: elementwise ops and reductions are memory-bound (a few flops per
// 4-12 bytes moved), so their ceiling is the memory bandwidth a plain copy reaches. The
// peak is a std::memcpy of a 256 MiB buffer (far beyond the caches), best of five, timed
// once per process; each benchmark reports bytes/s and its fraction of that peak.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

namespace kiln::bench {

// Bytes per second of a large memcpy (read + write counted), measured once.
double copy_peak_bytes_per_second();

// Runs `body` once per benchmark iteration and reports bytes/s and the fraction of the
// copy peak ("of_copy_peak", a plain number) for `bytes_per_iteration` bytes moved.
template <typename Body>
void run_bandwidth_benchmark(benchmark::State& state, double bytes_per_iteration, const Body& body) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) body();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double total = bytes_per_iteration * static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(total, benchmark::Counter::kIsRate);
  state.counters["of_copy_peak"] = total / seconds / copy_peak_bytes_per_second();
}

}  // namespace kiln::bench
