// CPU reduction engine: sum over the last dim (contiguous rows, one accumulator per
// row) and over the first dim (columns: rows accumulated into a vector), float32, plus
// the Welford var and softmax along the last dim.
//
// Roofline: memory-bound, 4 bytes read per element (outputs are negligible); softmax
// reads twice and writes once (~12 bytes per element) unless a row fits in cache.
#include "bench/bench_util.h"
#include "core/ops.h"

namespace kiln::bench {
namespace {

constexpr int64_t kCols = 4096;

void BM_Sum_LastDim(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor x = rand({n / kCols, kCols});
  run_bandwidth_benchmark(state, 4.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(sum(x, {1}).data_ptr()); });
}

void BM_Sum_FirstDim(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor x = rand({n / kCols, kCols});
  run_bandwidth_benchmark(state, 4.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(sum(x, {0}).data_ptr()); });
}

void BM_Var_LastDim(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor x = rand({n / kCols, kCols});
  run_bandwidth_benchmark(state, 4.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(var(x, {1}).data_ptr()); });
}

void BM_Softmax_LastDim(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor x = rand({n / kCols, kCols});
  run_bandwidth_benchmark(state, 8.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(softmax(x, 1).data_ptr()); });
}

constexpr int64_t kMin = int64_t{1} << 16;
constexpr int64_t kMax = int64_t{1} << 24;

BENCHMARK(BM_Sum_LastDim)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Sum_FirstDim)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Var_LastDim)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Softmax_LastDim)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();

}  // namespace
}  // namespace kiln::bench
