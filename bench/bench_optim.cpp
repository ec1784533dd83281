// CPU multi-tensor kernels on a real parameter list: the 161 tensors (47 M float32
// values) of a 3D ResNet-50 (bench/resnet50_params.h).
//
// Adam: the fused adam_step_ over the whole list (one call, one parallel loop over the
// list's chunks, kernels/cpu/multi_tensor_apply.h) against one adam_step_ call per
// parameter (161 calls, each parallel only inside its tensor, as a plain per-parameter
// loop would run). SGD (momentum; Nesterov momentum) and RMSprop (centered; momentum):
// the fused step over the list, one case per shape of the update. Scale: GradScaler's
// unscale_ + Inf/NaN check (multi_tensor_scale_ in place), and the fused norm that
// clip_grad_norm_ starts with.
//
// Roofline: memory-bound, a few flops per element. Bytes moved per element in float32:
//   adam (step counters negligible)  p, g, m, v read     + p, m, v written     = 28
//   sgd with momentum (Nesterov too) p, g, buf read       + p, buf written      = 20
//   rmsprop, centered                p, g, sq, avg read   + p, sq, avg written  = 28
//   rmsprop with momentum            p, g, sq, buf read   + p, sq, buf written  = 28
//   scale                            g read               + g written           = 8
//   norm                             g read                                     = 4
// The ceiling is the same run's copy peak (bench_util.h); the step counters and the
// per-call overhead are what separate the per-parameter loop from the fused call, and
// they matter most for the many small tensors (batch-norm weights and biases).
#include <vector>

#include "bench/bench_util.h"
#include "bench/resnet50_params.h"
#include "core/ops.h"
#include "core/ops/multi_tensor.h"

namespace kiln::bench {
namespace {

constexpr double kAdamBytesPerElement = 28.0;
constexpr double kSgdMomentumBytesPerElement = 20.0;
constexpr double kRmspropBytesPerElement = 28.0;  // centered, or with momentum

std::vector<Tensor> tensors_like_resnet(double value) {
  std::vector<Tensor> list;
  for (const auto& shape : resnet3d50_param_shapes()) list.push_back(full(shape, value));
  return list;
}

double element_count(const std::vector<Tensor>& list) {
  double n = 0;
  for (const Tensor& t : list) n += static_cast<double>(t.numel());
  return n;
}

// The lists of one Adam update of every parameter.
struct AdamLists {
  std::vector<Tensor> params = tensors_like_resnet(0.5), grads = tensors_like_resnet(0.01),
                      exp_avgs = tensors_like_resnet(0.0), exp_avg_sqs = tensors_like_resnet(0.0), steps;
  AdamLists() {
    for (size_t i = 0; i < params.size(); ++i) steps.push_back(scalar_tensor(0.0));
  }
};

const AdamStepParams kAdam{.lr = 1e-3, .weight_decay = 1e-2, .decoupled_weight_decay = true};

void BM_Adam_Fused_ResNet3d50(benchmark::State& state) {
  AdamLists l;
  run_bandwidth_benchmark(state, kAdamBytesPerElement * element_count(l.params), [&] {
    increment_steps_(l.steps);
    adam_step_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, {}, l.steps, kAdam);
  });
}

void BM_Adam_PerParameter_ResNet3d50(benchmark::State& state) {
  AdamLists l;
  run_bandwidth_benchmark(state, kAdamBytesPerElement * element_count(l.params), [&] {
    for (size_t i = 0; i < l.params.size(); ++i) {
      increment_steps_({l.steps[i]});
      adam_step_({l.params[i]}, {l.grads[i]}, {l.exp_avgs[i]}, {l.exp_avg_sqs[i]}, {}, {l.steps[i]}, kAdam);
    }
  });
}

// The fused SGD step with a momentum buffer per parameter (PyTorch's SGD after its first
// step), plain or Nesterov.
void run_sgd_momentum(benchmark::State& state, const SgdStepParams& options) {
  const std::vector<Tensor> params = tensors_like_resnet(0.5), grads = tensors_like_resnet(0.01),
                            buffers = tensors_like_resnet(0.0);
  run_bandwidth_benchmark(state, kSgdMomentumBytesPerElement * element_count(params),
                          [&] { sgd_step_(params, grads, buffers, options); });
}

void BM_Sgd_Momentum_ResNet3d50(benchmark::State& state) {
  run_sgd_momentum(state, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
}

void BM_Sgd_Nesterov_ResNet3d50(benchmark::State& state) {
  run_sgd_momentum(state, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
}

// The fused RMSprop step; the lists an option does not use stay empty.
void run_rmsprop(benchmark::State& state, const RmspropStepParams& options) {
  const std::vector<Tensor> params = tensors_like_resnet(0.5), grads = tensors_like_resnet(0.01),
                            square_avgs = tensors_like_resnet(0.0);
  const std::vector<Tensor> buffers = options.momentum > 0 ? tensors_like_resnet(0.0) : std::vector<Tensor>{};
  const std::vector<Tensor> grad_avgs = options.centered ? tensors_like_resnet(0.0) : std::vector<Tensor>{};
  run_bandwidth_benchmark(state, kRmspropBytesPerElement * element_count(params),
                          [&] { rmsprop_step_(params, grads, square_avgs, buffers, grad_avgs, options); });
}

void BM_Rmsprop_Centered_ResNet3d50(benchmark::State& state) {
  run_rmsprop(state, {.lr = 1e-2, .weight_decay = 1e-4, .centered = true});
}

void BM_Rmsprop_Momentum_ResNet3d50(benchmark::State& state) {
  run_rmsprop(state, {.lr = 1e-2, .weight_decay = 1e-4, .momentum = 0.9});
}

void BM_Scale_UnscaleAndCheck_ResNet3d50(benchmark::State& state) {
  const std::vector<Tensor> grads = tensors_like_resnet(1.0);
  const Tensor inv_scale = full({1}, 1.0), found_inf = zeros({1});
  run_bandwidth_benchmark(state, 8.0 * element_count(grads),
                          [&] { multi_tensor_scale_(grads, grads, inv_scale, found_inf); });
}

void BM_Norm_ResNet3d50(benchmark::State& state) {
  const std::vector<Tensor> grads = tensors_like_resnet(1.0);
  run_bandwidth_benchmark(state, 4.0 * element_count(grads),
                          [&] { benchmark::DoNotOptimize(multi_tensor_norm(grads, 2.0).data_ptr()); });
}

BENCHMARK(BM_Adam_Fused_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Adam_PerParameter_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sgd_Momentum_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sgd_Nesterov_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Rmsprop_Centered_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Rmsprop_Momentum_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Scale_UnscaleAndCheck_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Norm_ResNet3d50)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln::bench
