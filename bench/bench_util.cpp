// The same-run copy peak and bandwidth counters (see bench_util.h).
#include "bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace kiln::bench {

double copy_peak_bytes_per_second() {
  static const double peak = [] {
    constexpr size_t kBytes = size_t{256} << 20;
    std::vector<char> src(kBytes, 1), dst(kBytes, 0);
    double best = 0.0;
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), src.data(), kBytes);
      benchmark::DoNotOptimize(dst.data());
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::max(best, 2.0 * kBytes / seconds);
    }
    return best;
  }();
  return peak;
}

void report_bandwidth(benchmark::State& state, double bytes_per_iteration) {
  const double total = bytes_per_iteration * static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(total, benchmark::Counter::kIsRate);
  // kIsRate divides by the elapsed time, so dividing the bytes by the peak first gives
  // the fraction of the peak achieved.
  state.counters["of_copy_peak"] =
      benchmark::Counter(total / copy_peak_bytes_per_second(), benchmark::Counter::kIsRate);
}

}  // namespace kiln::bench
