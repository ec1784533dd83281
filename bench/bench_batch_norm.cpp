// CPU batch-norm pieces (kernels/cpu/batch_norm.cpp) on 3D-CNN shapes [N, C, D, H, W],
// float32: statistics, apply, backward reduce and backward input, through the Backend.
//
// Roofline: memory-bound (a few flops per value): stats reads x once (4 bytes a value);
// apply reads x and writes y (8); backward reduce reads x and dy (8); backward input
// reads x and dy and writes dx (12). Per-channel tensors are negligible. Rates count those
// compulsory bytes against the copy peak measured in the same run (bench_util.h).
#include "bench/bench_util.h"
#include "core/ops.h"

namespace kiln::bench {
namespace {

// args: N, C, spatial edge (D = H = W).
std::vector<int64_t> shape_of(const benchmark::State& state) {
  const int64_t e = state.range(2);
  return {state.range(0), state.range(1), e, e, e};
}

struct Operands {
  Tensor x, dy, out, mean, var, invstd, weight, bias;
  explicit Operands(const std::vector<int64_t>& sizes)
      : x(rand(sizes)), dy(rand(sizes)), out(empty(sizes)), mean(zeros({sizes[1]})), var(ones({sizes[1]})),
        invstd(ones({sizes[1]})), weight(ones({sizes[1]})), bias(zeros({sizes[1]})) {}
  double bytes(int tensors) const { return static_cast<double>(tensors) * 4.0 * static_cast<double>(x.numel()); }
};

void BM_BatchNormStats(benchmark::State& state) {
  const Operands o(shape_of(state));
  run_bandwidth_benchmark(state, o.bytes(1), [&] { backend(o.x.device()).batch_norm_stats(o.x, o.mean, o.var); });
}

void BM_BatchNormApply(benchmark::State& state) {
  const Operands o(shape_of(state));
  run_bandwidth_benchmark(state, o.bytes(2), [&] {
    backend(o.x.device()).batch_norm_apply(o.x, o.mean, o.invstd, o.weight, o.bias, o.out);
  });
}

void BM_BatchNormBackwardReduce(benchmark::State& state) {
  const Operands o(shape_of(state));
  run_bandwidth_benchmark(state, o.bytes(2), [&] {
    backend(o.x.device()).batch_norm_backward_reduce(o.dy, o.x, o.mean, o.var, o.invstd);
  });
}

void BM_BatchNormBackwardInput(benchmark::State& state) {
  const Operands o(shape_of(state));
  run_bandwidth_benchmark(state, o.bytes(3), [&] {
    backend(o.x.device()).batch_norm_backward_input(o.dy, o.x, o.mean, o.invstd, o.weight, o.mean, o.var,
                                                    o.x.numel() / o.x.sizes()[1], o.out);
  });
}

// [2, 64, 32^3] (few channels, big volumes: the chunk split), [8, 256, 8^3], [32, 512, 4^3].
#define KILN_BN_SHAPES ->Args({2, 64, 32})->Args({8, 256, 8})->Args({32, 512, 4})->UseRealTime()
BENCHMARK(BM_BatchNormStats) KILN_BN_SHAPES;
BENCHMARK(BM_BatchNormApply) KILN_BN_SHAPES;
BENCHMARK(BM_BatchNormBackwardReduce) KILN_BN_SHAPES;
BENCHMARK(BM_BatchNormBackwardInput) KILN_BN_SHAPES;
#undef KILN_BN_SHAPES

}  // namespace
}  // namespace kiln::bench
