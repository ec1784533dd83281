// CPU elementwise engine: unary (exp), binary (add), broadcast add, strided (transposed)
// input, and the copy kernel, in float32 from 64 KiB to 64 MiB per operand.
//
// Roofline: memory-bound. Bytes moved per element: unary 4 read + 4 write = 8, binary
// 8 + 4 = 12, broadcast add [R, C] + [C] ~ 8 (the row stays in cache), copy 8. The
// ceiling is the copy peak of bench_util.h; exp costs ~20 flops per element, so on two
// cores it may be compute-bound for small sizes. Ops that return a new tensor pay for
// fresh pages at 64 MiB (the CPU allocator does not cache; the kernel then first-touches
// every page), which is why BM_Copy_Contiguous, writing into a reused tensor, is the
// fairer engine-only figure at that size.
#include <cmath>

#include "bench/bench_util.h"
#include "core/ops.h"

namespace kiln::bench {
namespace {

void BM_Unary_Exp(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor x = rand({n});
  run_bandwidth_benchmark(state, 8.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(exp(x).data_ptr()); });
}

void BM_Binary_Add(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = rand({n}), b = rand({n});
  run_bandwidth_benchmark(state, 12.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(add(a, b).data_ptr()); });
}

void BM_Broadcast_AddRow(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t cols = 1024;
  const Tensor a = rand({n / cols, cols}), row = rand({cols});
  run_bandwidth_benchmark(state, 8.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(add(a, row).data_ptr()); });
}

void BM_Strided_TransposedCopy(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  const Tensor a = rand({side, side});
  run_bandwidth_benchmark(state, 8.0 * static_cast<double>(side * side),
                          [&] { benchmark::DoNotOptimize(a.t().contiguous().data_ptr()); });
}

void BM_Copy_Contiguous(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = rand({n});
  Tensor b = empty({n});
  NoGradGuard no_grad;
  run_bandwidth_benchmark(state, 8.0 * static_cast<double>(n), [&] {
    b.copy_(a);
    benchmark::DoNotOptimize(b.data_ptr());
  });
}

constexpr int64_t kMin = int64_t{1} << 14;  // 64 KiB of float32
constexpr int64_t kMax = int64_t{1} << 24;  // 64 MiB of float32

BENCHMARK(BM_Unary_Exp)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Binary_Add)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Broadcast_AddRow)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Strided_TransposedCopy)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Copy_Contiguous)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();

}  // namespace
}  // namespace kiln::bench
