// GraphedStep (graphed_step.h): keys, the warm-up streak, capture and replay, and the checks
// that the graph still matches its step (Note [A graphed step]).
#include "train/graphed_step.h"

#include <utility>

#include "core/autograd/grad_mode.h"
#include "core/cuda_graph.h"
#include "core/error.h"

namespace kiln::train {
namespace {

class CudaStepGraph final : public StepGraph {
 public:
  explicit CudaStepGraph(Device device) : graph_(device) {}
  void capture(const std::function<void()>& body) override { graph_.capture(body); }
  void replay() override { graph_.replay(); }

 private:
  CudaGraph graph_;
};

}  // namespace

StepGraphFactory cuda_graph_factory(Device device) {
  if (!device.is_cuda()) return nullptr;
  return [](Device d) -> std::unique_ptr<StepGraph> { return std::make_unique<CudaStepGraph>(d); };
}

GraphedStep::GraphedStep(Device device, Body body, GraphedStepOptions options)
    : device_(device), body_(std::move(body)), options_(std::move(options)) {
  KILN_CHECK(static_cast<bool>(body_), "GraphedStep: no step body");
  KILN_CHECK(options_.warmup_steps >= 1,
             "GraphedStep: warmup_steps must be at least 1 (the eager steps that make ",
             "lazily created state before a capture), got ", options_.warmup_steps);
  KILN_CHECK(
      options_.optimizer == nullptr || options_.optimizer->capturable(), "GraphedStep: the optimizer (",
      options_.optimizer ? options_.optimizer->name() : "", ") is not capturable; call set_capturable(true) ",
      "so that its learning rate and momentum are read from the device (Note [Capturable optimizers])");
  if (!options_.make_graph) options_.make_graph = cuda_graph_factory(device_);
}

GraphedStep::~GraphedStep() = default;

GraphedStep::BatchKey GraphedStep::key_of(const data::Batch& batch) {
  BatchKey key;
  key.reserve(batch.tensors.size());
  for (const auto& [name, t] : batch.tensors) {
    KILN_CHECK(t.defined(), "GraphedStep: the batch's tensor \"", name, "\" is undefined");
    key.push_back({name, t.sizes(), t.dtype(), t.device()});
  }
  return key;
}

GraphedStep::Frozen GraphedStep::frozen_now() const {
  Frozen f;
  if (options_.persistent) f.persistent = options_.persistent();
  if (options_.optimizer != nullptr) {
    for (Tensor& t : options_.optimizer->persistent_tensors()) f.persistent.push_back(std::move(t));
    f.optimizer_signature = options_.optimizer->scheduled_signature();
  }
  for (const Tensor& t : f.persistent) f.requires_grad.push_back(t.requires_grad());
  if (options_.signature) f.signature = options_.signature();
  return f;
}

std::optional<std::string> GraphedStep::differs(const Frozen& captured, const Frozen& now) {
  if (captured.optimizer_signature != now.optimizer_signature)
    return "the optimizer's options other than lr and momentum changed";
  if (captured.signature != now.signature) return "a host value the step reads (its signature) changed";
  bool same = captured.persistent.size() == now.persistent.size() && captured.requires_grad == now.requires_grad;
  for (size_t i = 0; same && i < now.persistent.size(); ++i) {
    same = captured.persistent[i].impl() == now.persistent[i].impl() &&
           captured.persistent[i].data_ptr() == now.persistent[i].data_ptr();
  }
  if (!same) return "a tensor the step keeps across steps (a parameter, a buffer, optimizer state) was replaced or made";
  return std::nullopt;
}

std::optional<std::string> GraphedStep::invalid_reason() const {
  if (options_.optimizer != nullptr && !options_.optimizer->capturable())
    return "the optimizer is no longer capturable";
  return differs(captured_, frozen_now());
}

// An eager step now (it makes whatever the change needs), a capture at the next step.
void GraphedStep::invalidate(const BatchKey& key, std::string reason) {
  last_recapture_reason_ = std::move(reason);
  ++recaptures_;
  graph_key_.reset();
  streak_key_ = key;
  streak_ = options_.warmup_steps - 1;
}

// What must be in device memory before a replay: the optimizer's lr and momentum (the
// graph writes the generators' seeds itself).
void GraphedStep::write_step_values() {
  if (options_.optimizer != nullptr) options_.optimizer->write_scheduled_options();
}

GraphedStep::Ran GraphedStep::run(const data::Batch& batch) {
  const BatchKey key = key_of(batch);
  if (graph_key_ && key == *graph_key_) {
    std::optional<std::string> reason = invalid_reason();
    if (!reason) {
      replay(batch);
      streak_key_.reset();  // another key's eager steps count only in a row
      streak_ = 0;
      return Ran::Replayed;
    }
    invalidate(key, std::move(*reason));
  }
  if (streak_key_ && key == *streak_key_) {
    ++streak_;
  } else {
    streak_key_ = key;
    streak_ = 1;
  }
  if (graphs_available() && streak_ > options_.warmup_steps) return capture_and_replay(batch, key);
  body_(batch);
  ++eager_steps_;
  return Ran::Eager;
}

void GraphedStep::replay(const data::Batch& batch) {
  {
    const NoGradGuard no_grad;
    for (auto& [name, t] : static_batch_.tensors) {
      const Tensor& next = batch.at(name);
      if (next.impl() != t.impl()) t.copy_(next, /*non_blocking=*/true);
    }
  }
  write_step_values();
  graph_->replay();
  ++replays_;
}

// The static batch is a copy of this batch, made before the capture (so not from the
// graph's pool); the captured body reads the member, so a graph may run the body again on
// it. If the capture throws, the static batch the graph read before is put back.
GraphedStep::Ran GraphedStep::capture_and_replay(const data::Batch& batch, const BatchKey& key) {
  for (const auto& [name, t] : batch.tensors) {
    KILN_CHECK(t.device() == device_, "GraphedStep: the batch's tensor \"", name, "\" is on ", t.device(),
               "; a step graphed on ", device_, " reads its batch from there (copy it first, as a DevicePrefetcher does)");
    KILN_CHECK(t.is_contiguous(), "GraphedStep: the batch's tensor \"", name, "\" (strides ", t.strides(),
               ") is not contiguous; the graph's static batch is contiguous, so the captured step would compute on "
               "another layout than the eager steps did (make the batch contiguous)");
  }
  data::Batch previous = std::move(static_batch_);
  static_batch_ = data::Batch{};
  {
    const NoGradGuard no_grad;
    for (const auto& [name, t] : batch.tensors) static_batch_.tensors.emplace(name, t.clone());
  }
  static_batch_.metadata = batch.metadata;
  static_batch_.indices = batch.indices;
  if (!graph_) graph_ = options_.make_graph(device_);
  graph_key_.reset();  // while capturing, and for good if the capture throws
  const Frozen before = frozen_now();
  try {
    graph_->capture([this] { body_(static_batch_); });
  } catch (...) {
    static_batch_ = std::move(previous);
    throw;
  }
  captured_ = frozen_now();
  streak_key_.reset();
  streak_ = 0;
  ++captures_;
  write_step_values();
  graph_->replay();  // the capture only recorded this step: now it runs
  ++replays_;
  // State the capture made is initialised by the graph: right for this one step, wrong at
  // every later replay, so the key is captured again once the state exists.
  if (std::optional<std::string> made = differs(before, captured_)) {
    invalidate(key, "the step made new state during its capture (" + *made + ")");
    return Ran::Captured;
  }
  graph_key_ = key;
  return Ran::Captured;
}

}  // namespace kiln::train
