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

bool same_tensors(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].impl() != b[i].impl() || a[i].data_ptr() != b[i].data_ptr()) return false;
  }
  return true;
}

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

std::vector<Tensor> GraphedStep::persistent_now() const {
  std::vector<Tensor> tensors = options_.persistent ? options_.persistent() : std::vector<Tensor>{};
  if (options_.optimizer != nullptr) {
    for (Tensor& t : options_.optimizer->persistent_tensors()) tensors.push_back(std::move(t));
  }
  return tensors;
}

std::optional<std::string> GraphedStep::invalid_reason() const {
  if (options_.optimizer != nullptr && options_.optimizer->scheduled_signature() != captured_signature_)
    return "the optimizer's options other than lr and momentum changed";
  if (!same_tensors(persistent_now(), captured_persistent_))
    return "a tensor the step keeps across steps (a parameter, a buffer, optimizer state) was replaced";
  return std::nullopt;
}

// What must be in device memory before a replay: the optimizer's lr and momentum (the
// graph writes the generators' seeds itself).
void GraphedStep::write_step_values() {
  if (options_.optimizer != nullptr) options_.optimizer->write_scheduled_options();
}

GraphedStep::Ran GraphedStep::run(const data::Batch& batch) {
  const BatchKey key = key_of(batch);
  if (graph_key_ && key == *graph_key_) {
    const std::optional<std::string> reason = invalid_reason();
    if (!reason) {
      replay(batch);
      return Ran::Replayed;
    }
    // An eager step now (it makes whatever the change needs), the capture at the next.
    last_recapture_reason_ = *reason;
    ++recaptures_;
    graph_key_.reset();
    streak_key_ = key;
    streak_ = options_.warmup_steps - 1;
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
  try {
    graph_->capture([this] { body_(static_batch_); });
  } catch (...) {
    static_batch_ = std::move(previous);
    throw;
  }
  graph_key_ = key;
  captured_persistent_ = persistent_now();
  if (options_.optimizer != nullptr) captured_signature_ = options_.optimizer->scheduled_signature();
  streak_key_.reset();
  streak_ = 0;
  ++captures_;
  write_step_values();
  graph_->replay();  // the capture only recorded this step: now it runs
  ++replays_;
  return Ran::Captured;
}

}  // namespace kiln::train
