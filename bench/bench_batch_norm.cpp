// CPU batch-norm pieces (kernels/cpu/batch_norm.cpp) on 3D-CNN shapes [N, C, D, H, W],
// float32: statistics, apply, backward reduce and backward input, through the Backend, in
// NCDHW and in channels-last (NDHWC: kernels/cpu/batch_norm_channels_last.cpp; 5th arg 1),
// each also with the fused ReLU (Note [Batch norm with ReLU] in core/backend.h), which moves
// the same bytes (the mask is recomputed from x) and does a compare more per value; and the
// ops with their fused tails against the unfused compositions.
//
// Roofline: memory-bound (a few flops per value): stats reads x once (4 bytes a value);
// apply reads x and writes y (8); backward reduce reads x and dy (8); backward input
// reads x and dy and writes dx (12). Per-channel tensors are negligible. Rates count those
// compulsory bytes against the copy peak measured in the same run (bench_util.h).
#include "bench/bench_util.h"
#include "core/ops.h"

namespace kiln::bench {
namespace {

// args: N, C, spatial edge (D = H = W), relu (0 or 1; the statistics ignore it),
// channels-last (0 or 1).
std::vector<int64_t> shape_of(const benchmark::State& state) {
  const int64_t e = state.range(2);
  return {state.range(0), state.range(1), e, e, e};
}
MemoryFormat layout_of(const benchmark::State& state) {
  return state.range(4) != 0 ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
}

struct Operands {
  Tensor x, dy, out, mean, var, invstd, weight, bias, sum_dy, sum_dy_xmu;
  BatchNormCoefficients norm;
  explicit Operands(const benchmark::State& state)
      : x(rand(shape_of(state)).contiguous(layout_of(state))),
        dy(rand(x.sizes()).contiguous(layout_of(state))),
        out(empty_like(x)),
        mean(full({x.size(1)}, 0.5)),
        var(ones({x.size(1)})),
        invstd(ones({x.size(1)})),
        weight(ones({x.size(1)})),
        bias(zeros({x.size(1)})),
        sum_dy(zeros({x.size(1)})),
        sum_dy_xmu(zeros({x.size(1)})),
        norm{.mean = mean, .invstd = invstd, .weight = weight, .bias = bias, .relu = state.range(3) != 0} {}
  double bytes(int tensors) const { return static_cast<double>(tensors) * 4.0 * static_cast<double>(x.numel()); }
};

void label(benchmark::State& state, const Operands& o) {
  const bool cl = state.range(4) != 0;
  state.SetLabel(std::string(o.norm.relu ? "fused relu" : "") + (o.norm.relu && cl ? ", " : "") +
                 (cl ? "channels-last" : ""));
}

void BM_BatchNormStats(benchmark::State& state) {
  const Operands o(state);
  run_bandwidth_benchmark(state, o.bytes(1), [&] { backend(o.x.device()).batch_norm_stats(o.x, o.mean, o.var); });
  label(state, o);
}

void BM_BatchNormApply(benchmark::State& state) {
  const Operands o(state);
  run_bandwidth_benchmark(state, o.bytes(2), [&] { backend(o.x.device()).batch_norm_apply(o.x, o.norm, o.out); });
  label(state, o);
}

void BM_BatchNormBackwardReduce(benchmark::State& state) {
  const Operands o(state);
  run_bandwidth_benchmark(state, o.bytes(2), [&] {
    backend(o.x.device()).batch_norm_backward_reduce(o.dy, o.x, o.norm, o.sum_dy, o.sum_dy_xmu, Tensor());
  });
  label(state, o);
}

void BM_BatchNormBackwardInput(benchmark::State& state) {
  const Operands o(state);
  run_bandwidth_benchmark(state, o.bytes(3), [&] {
    backend(o.x.device()).batch_norm_backward_input(o.dy, o.x, o.norm, o.sum_dy, o.sum_dy_xmu,
                                                    o.x.numel() / o.x.sizes()[1], o.out);
  });
  label(state, o);
}

// One training-mode forward and backward through the ops, as a layer runs them:
// batch_norm_relu (arg 1) against relu(batch_norm(...)) (arg 0), on [8, 64, 28^3], the 3D
// ResNet-18 stem's activation at batch 8. Bytes: the fused op's compulsory traffic (stats
// 1, apply 2, backward reduce 2, backward input 3 activations), for both, so the rates
// compare as times do.
void BM_BatchNormReluOp(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  const Tensor x = rand({8, 64, 28, 28, 28}).requires_grad_(true);
  const Tensor weight = ones({64}).requires_grad_(true), bias = zeros({64}).requires_grad_(true);
  const Tensor running_mean = zeros({64}), running_var = ones({64});
  const Tensor upstream = rand(x.sizes());
  run_bandwidth_benchmark(state, 8.0 * 4.0 * static_cast<double>(x.numel()), [&] {
    const Tensor y = fused ? batch_norm_relu(x, running_mean, running_var, weight, bias, true)
                           : relu(batch_norm(x, running_mean, running_var, weight, bias, true));
    y.backward(upstream);
    for (const Tensor* t : {&x, &weight, &bias}) t->set_grad(Tensor());  // to None, as zero_grad
  });
  state.SetLabel(fused ? "batch_norm_relu" : "relu(batch_norm)");
}

// A residual block's tail, training-mode forward and backward: batch_norm_add_relu (arg 0
// = 1) against relu(batch_norm(x) + r) (arg 0 = 0), on [8, 64, 28^3] in NCDHW or
// channels-last (arg 1). Bytes: the fused op's compulsory traffic (Note [Batch norm, add
// and ReLU]: stats 1, apply 3, backward reduce 4, backward input 3 activations) for both,
// so the rates compare as times do; the composition moves 16 (stats 1, apply 2, add 3,
// relu 2; relu backward 3, batch-norm backward 5), so the fused op's roofline gain is
// 16 / 11 = 1.45x.
void BM_BatchNormAddReluOp(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  const MemoryFormat format = state.range(1) != 0 ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
  const Tensor x = rand({8, 64, 28, 28, 28}).contiguous(format).requires_grad_(true);
  const Tensor residual = sub(rand(x.sizes()), 0.5).contiguous(format).requires_grad_(true);
  const Tensor weight = ones({64}).requires_grad_(true), bias = zeros({64}).requires_grad_(true);
  const Tensor running_mean = zeros({64}), running_var = ones({64});
  const Tensor upstream = rand(x.sizes()).contiguous(format);
  run_bandwidth_benchmark(state, 11.0 * 4.0 * static_cast<double>(x.numel()), [&] {
    const Tensor y = fused
                         ? batch_norm_add_relu(x, residual, running_mean, running_var, weight, bias, true)
                         : relu(add(batch_norm(x, running_mean, running_var, weight, bias, true), residual));
    y.backward(upstream);
    for (const Tensor* t : {&x, &residual, &weight, &bias}) t->set_grad(Tensor());  // to None, as zero_grad
  });
  state.SetLabel(std::string(fused ? "batch_norm_add_relu" : "relu(batch_norm + r)") +
                 (state.range(1) != 0 ? ", channels-last" : ""));
}

// [2, 64, 32^3] (few channels, big volumes: the chunk split), [8, 256, 8^3], [32, 512, 4^3],
// each in both layouts; the elementwise passes also with the fused ReLU (4th arg 1).
#define KILN_BN_SHAPES                               \
  ->ArgsProduct({{2}, {64}, {32}, {0}, {0, 1}})      \
      ->ArgsProduct({{8}, {256}, {8}, {0}, {0, 1}})  \
      ->ArgsProduct({{32}, {512}, {4}, {0}, {0, 1}}) \
      ->UseRealTime()
#define KILN_BN_SHAPES_RELU                                   \
  KILN_BN_SHAPES->ArgsProduct({{2}, {64}, {32}, {1}, {0, 1}}) \
      ->ArgsProduct({{8}, {256}, {8}, {1}, {0, 1}})           \
      ->ArgsProduct({{32}, {512}, {4}, {1}, {0, 1}})
BENCHMARK(BM_BatchNormStats) KILN_BN_SHAPES;
BENCHMARK(BM_BatchNormApply) KILN_BN_SHAPES_RELU;
BENCHMARK(BM_BatchNormBackwardReduce) KILN_BN_SHAPES_RELU;
BENCHMARK(BM_BatchNormBackwardInput) KILN_BN_SHAPES_RELU;
BENCHMARK(BM_BatchNormReluOp)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BatchNormAddReluOp)->ArgsProduct({{0, 1}, {0, 1}})->UseRealTime()->Unit(benchmark::kMillisecond);
#undef KILN_BN_SHAPES_RELU
#undef KILN_BN_SHAPES

}  // namespace
}  // namespace kiln::bench
