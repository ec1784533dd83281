// CPU matmul (Eigen GEMM behind Backend::bmm) for square sizes, float32 and float64.
//
// Roofline: an N x N x N product does 2 N^3 flops on 3 N^2 elements, so from N ~ 64 on it
// is compute-bound: the ceiling is cores x SIMD lanes x 2 (FMA) x clock, e.g. on two
// AVX2 cores at 3 GHz: 2 x 8 x 2 x 3e9 ~ 96 GFLOP/s in float32, half that in float64.
// Reported: FLOP/s. Small sizes are dominated by the per-call overhead (allocation,
// dispatch), which the 64 case shows.
#include "bench/bench_util.h"
#include "core/ops.h"

namespace kiln::bench {
namespace {

template <DType kDType>
void BM_Matmul_Square(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = rand({n, n}, {.dtype = kDType}), b = rand({n, n}, {.dtype = kDType});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b).data_ptr());
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

// The same product with a transposed operand: Eigen reads the strided map directly.
void BM_Matmul_TransposedRhs_F32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = rand({n, n}), b = rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b.t()).data_ptr());
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Matmul_Square<DType::Float32>)->RangeMultiplier(2)->Range(64, 1024)->UseRealTime();
BENCHMARK(BM_Matmul_Square<DType::Float64>)->RangeMultiplier(2)->Range(64, 1024)->UseRealTime();
BENCHMARK(BM_Matmul_TransposedRhs_F32)->RangeMultiplier(4)->Range(64, 1024)->UseRealTime();

}  // namespace
}  // namespace kiln::bench
