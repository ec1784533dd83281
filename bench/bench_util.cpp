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

}  // namespace kiln::bench
