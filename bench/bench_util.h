// Shared pieces of Kiln's CPU benchmarks: the copy-bandwidth peak measured in the same
// run, and the counters every benchmark reports.
//
// Roofline on the CPU: elementwise ops and reductions are memory-bound (a few flops per
// 4-12 bytes moved), so their ceiling is the memory bandwidth a plain copy reaches. The
// peak is a std::memcpy of a 256 MiB buffer (far beyond the caches), best of five, timed
// once per process; each benchmark reports bytes/s and its fraction of that peak.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>

namespace kiln::bench {

// Bytes per second of a large memcpy (read + write counted), measured once.
double copy_peak_bytes_per_second();

// Sets bytes/s (rate) and the fraction of the copy peak for `bytes_per_iteration`.
void report_bandwidth(benchmark::State& state, double bytes_per_iteration);

}  // namespace kiln::bench
