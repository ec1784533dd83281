// CPU elementwise engine: unary (exp, relu), binary (add, relu backward), broadcast add,
// strided (transposed) input, and the copy kernel, in float32 from 64 KiB to 64 MiB per
// operand; and cross-entropy forward + backward (the classifier's loss).
//
// Roofline: memory-bound. Bytes moved per element: unary 4 read + 4 write = 8, binary
// 8 + 4 = 12, broadcast add [R, C] + [C] ~ 8 (the row stays in cache), copy 8. The
// ceiling is the copy peak of bench_util.h; exp costs ~20 flops per element, so on two
// cores it may be compute-bound for small sizes (it is not: vectorisable_exp runs at the
// copy's speed). Ops that return a new tensor take it from the CPU caching allocator (Note
// [CPU caching allocator]), so from the second iteration on no page is fresh.
// ReLU: forward 8 bytes a value; backward (grad, saved output -> grad_in) 12.
// Cross-entropy over [rows, 1000] logits, forward and backward through autograd:
// log_softmax reads and writes the logits (8), nll reads one value a row; backward writes
// the one-hot gradient (4) and log_softmax's backward reads it and its output and writes
// grad_in (12): 24 bytes a logit.
// Channels-last 3D (Note [Loops in memory order]): [2, 32, s, s, s] activations, operands
// and result NDHWC, beside the same ops in NCDHW: an add (12 bytes a value) and a
// per-channel bias add (8: the [C] values stay in cache). Equal speeds mean the NDHWC
// loop runs flat, as the NCDHW one does.
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

void BM_Unary_Relu(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor x = randn({n});
  run_bandwidth_benchmark(state, 8.0 * static_cast<double>(n),
                          [&] { benchmark::DoNotOptimize(relu(x).data_ptr()); });
}

void BM_ReluBackward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor grad = randn({n}), out = relu(randn({n}));
  run_bandwidth_benchmark(state, 12.0 * static_cast<double>(n), [&] {
    benchmark::DoNotOptimize(binary_kernel(BinaryOp::ReluBackward, grad, out).data_ptr());
  });
}

void BM_CrossEntropy_ForwardBackward(benchmark::State& state) {
  const int64_t rows = state.range(0) / 1000;
  const Tensor logits = randn({rows, 1000}).requires_grad_(true);
  const Tensor target = randint(0, 1000, {rows});
  run_bandwidth_benchmark(state, 24.0 * static_cast<double>(logits.numel()), [&] {
    cross_entropy(logits, target).backward();
    logits.set_grad(Tensor());
  });
}

MemoryFormat format_arg(int64_t channels_last) {
  return channels_last != 0 ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
}

void BM_ChannelsLast3d_Add(benchmark::State& state) {
  const int64_t side = state.range(0);
  const Tensor a = rand({2, 32, side, side, side}).contiguous(format_arg(state.range(1)));
  const Tensor b = rand({2, 32, side, side, side}).contiguous(format_arg(state.range(1)));
  run_bandwidth_benchmark(state, 12.0 * static_cast<double>(a.numel()),
                          [&] { benchmark::DoNotOptimize(add(a, b).data_ptr()); });
}

void BM_ChannelsLast3d_AddBias(benchmark::State& state) {
  const int64_t side = state.range(0);
  const Tensor a = rand({2, 32, side, side, side}).contiguous(format_arg(state.range(1)));
  const Tensor bias = rand({1, 32, 1, 1, 1});
  run_bandwidth_benchmark(state, 8.0 * static_cast<double>(a.numel()),
                          [&] { benchmark::DoNotOptimize(add(a, bias).data_ptr()); });
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
BENCHMARK(BM_Unary_Relu)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_ReluBackward)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_CrossEntropy_ForwardBackward)->Arg(int64_t{1} << 20)->Arg(int64_t{1} << 24)->UseRealTime();
BENCHMARK(BM_Binary_Add)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_ChannelsLast3d_Add)->ArgsProduct({{16, 28}, {0, 1}})->ArgNames({"side", "channels_last"})->UseRealTime();
BENCHMARK(BM_ChannelsLast3d_AddBias)
    ->ArgsProduct({{16, 28}, {0, 1}})
    ->ArgNames({"side", "channels_last"})
    ->UseRealTime();
BENCHMARK(BM_Broadcast_AddRow)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Strided_TransposedCopy)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();
BENCHMARK(BM_Copy_Contiguous)->RangeMultiplier(16)->Range(kMin, kMax)->UseRealTime();

}  // namespace
}  // namespace kiln::bench
