// Activation checkpointing (see checkpoint.h): forward without a graph, recompute in
// backward with the random generators rewound and the forward's autocast state.
#include "core/autograd/checkpoint.h"

#include <utility>

#include "core/autocast.h"
#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/generator.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

// The default generators whose state the recompute must see again: the CPU's and those
// of every input's device.
std::vector<std::pair<Device, PhiloxState>> capture_rng(const std::vector<Tensor>& inputs) {
  std::vector<std::pair<Device, PhiloxState>> states{{Device::cpu(), default_generator(Device::cpu()).state()}};
  for (const Tensor& x : inputs) {
    if (!x.defined() || x.device().is_cpu()) continue;
    bool seen = false;
    for (const auto& s : states) seen |= s.first == x.device();
    if (!seen) states.emplace_back(x.device(), default_generator(x.device()).state());
  }
  return states;
}

void restore_rng(const std::vector<std::pair<Device, PhiloxState>>& states) {
  for (const auto& [device, state] : states) default_generator(device).set_state(state);
}

thread_local int recompute_depth = 0;  // Note [Checkpoint recompute]; nested checkpoints count

struct RecomputeScope {
  RecomputeScope() { ++recompute_depth; }
  ~RecomputeScope() { --recompute_depth; }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;
};

struct CheckpointBackward final : Node {
  CheckpointFunction fn;
  std::vector<SavedTensor> inputs;
  std::vector<bool> input_requires_grad;
  std::vector<size_t> recorded_outputs;  // which of fn's outputs this node's slots are
  std::vector<std::pair<Device, PhiloxState>> rng_at_forward;
  AutocastState autocast_at_forward;  // Note [Backward runs without autocast]

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> detached;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor x = inputs[i].unpack(*this);
      if (x.defined()) {
        x = x.detach();
        if (input_requires_grad[i]) x.requires_grad_(true);
      }
      detached.push_back(x);
    }
    const auto rng_now = capture_rng(detached);
    restore_rng(rng_at_forward);
    std::vector<Tensor> outputs;
    {
      EnableGradGuard enable_grad;
      const AutocastGuard autocast(autocast_at_forward.dtype, autocast_at_forward.enabled);
      const RecomputeScope recompute;
      outputs = fn(detached);
    }
    restore_rng(rng_now);

    std::vector<Tensor> roots, root_grads;
    for (size_t slot = 0; slot < recorded_outputs.size(); ++slot) {
      const Tensor& out = outputs.at(recorded_outputs[slot]);
      if (out.requires_grad()) {
        roots.push_back(out);
        root_grads.push_back(grads[slot]);
      }
    }
    if (!roots.empty()) autograd::backward(roots, root_grads);
    std::vector<Tensor> input_grads;
    for (const Tensor& x : detached) input_grads.push_back(x.defined() && x.requires_grad() ? x.grad() : Tensor());
    return input_grads;
  }
  void release_saved() override {
    for (SavedTensor& s : inputs) s.release();
  }
  std::string name() const override { return "checkpoint"; }
};

}  // namespace

bool checkpoint_recomputing() { return recompute_depth > 0; }

std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs) {
  KILN_CHECK(static_cast<bool>(fn), "checkpoint: no function given");
  // Parameters used inside fn are invisible here, so in grad mode the outputs are always
  // recorded (unlike PyTorch's reentrant checkpoint, which loses their gradients when no
  // input requires grad).
  const bool recording = autograd::grad_mode_enabled();
  const auto rng_at_forward = capture_rng(inputs);
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  if (!recording) return outputs;
  auto node = make_pooled<CheckpointBackward>();
  node->fn = fn;
  node->rng_at_forward = rng_at_forward;
  node->autocast_at_forward = autocast_state();
  for (const Tensor& x : inputs) {
    node->inputs.emplace_back(x);
    node->input_requires_grad.push_back(x.defined() && x.requires_grad());
  }
  std::vector<Tensor> recorded;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined() && is_floating(outputs[i].dtype())) {
      node->recorded_outputs.push_back(i);
      recorded.push_back(outputs[i]);
    }
  }
  autograd::record(node, inputs, recorded);
  return outputs;
}

}  // namespace kiln
