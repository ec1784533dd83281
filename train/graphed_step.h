// GraphedStep: a whole training step (forward, loss, backward, clipping, GradScaler, the
// fused optimizer, the running sums) captured once per input shape as one CUDA graph and
// replayed: one launch from the host where an eager step makes hundreds. kiln train's
// --cuda-graphs uses it; a hand-written loop can too:
//
//   optimizer.set_capturable(true);  // lr and momentum read from the device (Note [Capturable optimizers])
//   train::GraphedStep step(device, [&](const data::Batch& b) {
//     Tensor loss = cross_entropy(model.forward(b.at("image")), b.at("label"));
//     loss.backward();
//     optimizer.step();
//     optimizer.zero_grad();
//   }, {.optimizer = &optimizer});
//   for (const data::Batch& batch : loader.epoch(e)) { step.run(batch); scheduler.step(); }
//
// Note [A graphed step]:
// - run(batch) keys the batch by its tensors' names, sizes, dtypes and devices. A batch
//   of the graph's key is copied into the graph's static batch (the tensors the capture
//   read), the optimizer's scheduled options are written (Note [Capturable optimizers]),
//   and the graph is replayed. Any other batch runs the body eagerly on itself: the
//   warm-up, and a one-off batch such as an epoch's last, smaller one.
// - A key seen warmup_steps times in a row (no replay between) is captured at its next
//   step, then replayed at once (the capture records the step; the replay runs it). The
//   eager warm-up makes what is made lazily (optimizer moments, GradScaler's scale, cuDNN's
//   benchmark choices) outside the capture. A capture of another key replaces the graph (a
//   change of shape re-captures, in place when CUDA can). The batch's tensors must be on
//   the graph's device, contiguous (the static batch is a contiguous copy of them).
// - Host code in the body runs once, at the capture: what it reads there is frozen into
//   the graph. So the body must not keep host counters (count steps outside it), must
//   not read the device (a host sync during the capture is an error naming it), and
//   must update what it keeps across steps in place. GraphedStep guards what it can see:
//   at every replay, the tensors `persistent` returns must be the ones the capture saw,
//   with the same requires_grad (a replaced one, such as a loaded optimizer state, would
//   leave the graph writing the old tensor), the optimizer must still be capturable with
//   the same scheduled_signature() (its options other than lr and momentum), and the
//   caller's `signature` (other host values the body reads: a module's training flag, the
//   GradScaler's factors) must be unchanged; otherwise the step runs eagerly and the key
//   is captured again at its next step (recaptures(), last_recapture_reason()). State the
//   capture itself made (a tensor `persistent` returns only after it: a parameter's first
//   gradient, say) is initialised by the recording, so the captured graph runs that one
//   step and is then captured again, once the state exists.
// - Random ops in the body draw fresh numbers at each replay from the device's default
//   generator (Note [Philox under capture]), and bounds-checked index ops keep their
//   findings (Note [Index checks in a CUDA graph]): a replayed run equals an eager one
//   bit for bit (tests/cuda/test_graphed_step.cpp).
// - On a device without graphs (the CPU) every step runs eagerly.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "data/loader.h"
#include "optim/optimizer.h"

namespace kiln::train {

// What GraphedStep needs of a graph: CudaGraph's capture and replay (a test may stand in).
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Records `body`'s device work; a throw from `body` abandons the capture and goes on.
  virtual void capture(const std::function<void()>& body) = 0;
  virtual void replay() = 0;
};
using StepGraphFactory = std::function<std::unique_ptr<StepGraph>(Device)>;

struct GraphedStepOptions {
  // Eager steps of a key before it is captured (>= 1).
  int64_t warmup_steps = 3;
  // Capturable (set_capturable(true)); its scheduled options are written before each
  // replay, and its scheduled_signature() and persistent_tensors() are checked.
  optim::Optimizer* optimizer = nullptr;
  // The other tensors the body keeps across steps (the model's parameters and buffers,
  // running sums): checked, by identity, at every replay.
  std::function<std::vector<Tensor>()> persistent = nullptr;
  // Other host values the body reads and the capture freezes (a module's training flag,
  // GradScaler's factors): checked at every replay.
  std::function<std::vector<double>()> signature = nullptr;
  // Makes the graph; by default a CudaGraph of the device. Unset on a device without
  // graphs: every step runs eagerly.
  StepGraphFactory make_graph = nullptr;
};

class GraphedStep {
 public:
  using Body = std::function<void(const data::Batch& batch)>;
  enum class Ran { Eager, Captured, Replayed };

  GraphedStep(Device device, Body body, GraphedStepOptions options = {});
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  // One step on `batch` (Note [A graphed step]); says how it ran.
  Ran run(const data::Batch& batch);

  // Whether steps can be graphed on this device at all.
  bool graphs_available() const { return static_cast<bool>(options_.make_graph); }
  int64_t eager_steps() const { return eager_steps_; }
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  // Captures made because the graph no longer matched its step (not a new shape).
  int64_t recaptures() const { return recaptures_; }
  const std::string& last_recapture_reason() const { return last_recapture_reason_; }

 private:
  struct BatchKeyEntry {
    std::string name;
    std::vector<int64_t> sizes;
    DType dtype;
    Device device;
    bool operator==(const BatchKeyEntry&) const = default;
  };
  using BatchKey = std::vector<BatchKeyEntry>;
  static BatchKey key_of(const data::Batch& batch);

  // Why the graph no longer matches the step, or nothing.
  std::optional<std::string> invalid_reason() const;
  void invalidate(const BatchKey& key, std::string reason);
  Ran capture_and_replay(const data::Batch& batch, const BatchKey& key);
  void replay(const data::Batch& batch);
  void write_step_values();

  Device device_;
  Body body_;
  GraphedStepOptions options_;
  std::optional<BatchKey> graph_key_;  // the key the graph was captured for
  data::Batch static_batch_;           // what the capture read; each replay's batch is copied in
  // What the capture froze (Note [A graphed step]): the persistent tensors and their
  // requires_grad, and the optimizer's and the caller's signatures.
  struct Frozen {
    std::vector<Tensor> persistent;
    std::vector<bool> requires_grad;
    std::vector<double> optimizer_signature, signature;
  };
  Frozen frozen_now() const;
  static std::optional<std::string> differs(const Frozen& captured, const Frozen& now);
  Frozen captured_;
  std::optional<BatchKey> streak_key_;  // the key of the last eager steps, and how many in a row
  int64_t streak_ = 0;
  int64_t eager_steps_ = 0, captures_ = 0, replays_ = 0, recaptures_ = 0;
  std::string last_recapture_reason_;
  // Last, so it goes first: a graph waits for its last replay, then what it read is freed.
  std::unique_ptr<StepGraph> graph_;
};

// The default StepGraphFactory of `device`: a CudaGraph on a GPU, unset elsewhere.
StepGraphFactory cuda_graph_factory(Device device);

}  // namespace kiln::train
