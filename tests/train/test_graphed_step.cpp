// GraphedStep's rules (Note [A graphed step], train/graphed_step.h), on the CPU with a
// stand-in graph that records the body at capture and runs it at each replay, as a CUDA
// graph does: warm-up steps run eagerly, the next step of the same shape is captured and
// run, later ones replay on the batch copied into the static one, with results equal to
// eager steps; a one-off batch runs eagerly without dropping the graph; a shape that
// stays re-captures; a replaced persistent tensor or a changed optimizer option makes
// one eager step and a new capture, as do a changed signature and state the capture made;
// one-off batches never replace the graph; a capture that throws leaves nothing replaying;
// a strided batch is refused at the capture; and without graphs (the CPU's default) every
// step is eager. Real graphs:
// tests/cuda/test_graphed_step.cpp.
#include <gtest/gtest.h>

#include <memory>

#include "core/ops.h"
#include "nn/linear.h"
#include "optim/optim.h"
#include "tests/test_util.h"
#include "train/graphed_step.h"

namespace kiln {
namespace {

using testing::all_equal;
using train::GraphedStep;
using train::GraphedStepOptions;
using Ran = GraphedStep::Ran;

// Records the body at capture (running nothing) and runs it at each replay.
struct RecordingGraph final : train::StepGraph {
  std::function<void()> body;
  int* made;
  explicit RecordingGraph(int* made_count) : made(made_count) { ++*made; }
  void capture(const std::function<void()>& b) override { body = b; }
  void replay() override { body(); }
};

train::StepGraphFactory recording_graphs(int* made) {
  return
      [made](Device) -> std::unique_ptr<train::StepGraph> { return std::make_unique<RecordingGraph>(made); };
}

data::Batch batch_of(int64_t rows, uint64_t seed) {
  Generator g(seed);
  data::Batch b;
  b.tensors.emplace("image", randn({rows, 4}, {}, &g));
  b.tensors.emplace("label", randn({rows, 2}, {}, &g));
  return b;
}

// A model, its capturable optimizer and the step's body, as a training loop has them.
struct Loop {
  nn::Linear model{nn::LinearOptions{.in_features = 4, .out_features = 2}};
  std::unique_ptr<optim::SGD> sgd;
  int64_t bodies = 0;  // how often the body's host code ran
  const data::Batch* seen = nullptr;

  explicit Loop(bool capturable) {
    manual_seed(5);
    model.reset_parameters();
    sgd = std::make_unique<optim::SGD>(model.parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    sgd->set_capturable(capturable);
  }
  void body(const data::Batch& b) {
    ++bodies;
    seen = &b;
    mse_loss(model.forward(b.at("image")), b.at("label")).backward();
    sgd->step();
    sgd->zero_grad();
  }
  GraphedStep graphed(int* made, int64_t warmup = 2) {
    return GraphedStep(
        Device::cpu(), [this](const data::Batch& b) { body(b); },
        GraphedStepOptions{.warmup_steps = warmup,
                           .optimizer = sgd.get(),
                           .persistent = [this] { return model.parameters(); },
                           .make_graph = recording_graphs(made)});
  }
};

void expect_same_weights(nn::Linear& a, nn::Linear& b) {
  const std::vector<Tensor> pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(all_equal(pa[i], pb[i])) << "parameter " << i;
}

TEST(GraphedStep, WarmUpThenOneCaptureThenReplaysThatEqualEagerSteps) {
  int made = 0;
  Loop graphed(true), eager(true);
  GraphedStep step = graphed.graphed(&made);
  std::vector<Ran> ran;
  for (uint64_t i = 0; i < 6; ++i) {
    const data::Batch b = batch_of(8, 100 + i);
    ran.push_back(step.run(b));
    eager.body(b);
    expect_same_weights(graphed.model, eager.model);
  }
  EXPECT_EQ(ran, (std::vector<Ran>{Ran::Eager, Ran::Eager, Ran::Captured, Ran::Replayed, Ran::Replayed,
                                   Ran::Replayed}));
  EXPECT_EQ(made, 1);
  EXPECT_EQ(step.eager_steps(), 2);
  EXPECT_EQ(step.captures(), 1);
  EXPECT_EQ(step.replays(), 4);  // the captured step ran by a replay too
  EXPECT_EQ(step.recaptures(), 0);
}

TEST(GraphedStep, AReplayedBodyReadsTheStaticBatchHoldingTheNewValues) {
  int made = 0;
  Loop loop(true);
  GraphedStep step = loop.graphed(&made, 1);
  const data::Batch first = batch_of(8, 1), second = batch_of(8, 2), third = batch_of(8, 3);
  step.run(first);
  EXPECT_EQ(loop.seen, &first) << "an eager step runs on the batch itself";
  step.run(second);
  const data::Batch* captured_on = loop.seen;
  EXPECT_NE(captured_on, &second) << "a capture reads the static batch";
  EXPECT_NE(captured_on->at("image").data_ptr(), second.at("image").data_ptr());
  EXPECT_TRUE(all_equal(captured_on->at("image"), second.at("image")));
  step.run(third);
  EXPECT_EQ(loop.seen, captured_on) << "replays read the same static batch";
  EXPECT_TRUE(all_equal(loop.seen->at("image"), third.at("image")));
  EXPECT_TRUE(all_equal(loop.seen->at("label"), third.at("label")));
}

TEST(GraphedStep, AOneOffBatchRunsEagerlyAndTheGraphGoesOnReplaying) {
  int made = 0;
  Loop graphed(true), eager(true);
  GraphedStep step = graphed.graphed(&made);
  const std::vector<int64_t> rows = {8, 8, 8, 8, 3, 8, 8, 3, 8};  // two epochs' last, shorter batches
  std::vector<Ran> ran;
  for (size_t i = 0; i < rows.size(); ++i) {
    const data::Batch b = batch_of(rows[i], 200 + i);
    ran.push_back(step.run(b));
    eager.body(b);
  }
  expect_same_weights(graphed.model, eager.model);
  EXPECT_EQ(ran, (std::vector<Ran>{Ran::Eager, Ran::Eager, Ran::Captured, Ran::Replayed, Ran::Eager,
                                   Ran::Replayed, Ran::Replayed, Ran::Eager, Ran::Replayed}));
  EXPECT_EQ(step.captures(), 1);
}

// An epoch's last, shorter batch comes once an epoch: replays between them keep it from
// ever counting as a shape that stays.
TEST(GraphedStep, OneOffBatchesEpochAfterEpochNeverReplaceTheGraph) {
  int made = 0;
  Loop loop(true);
  GraphedStep step = loop.graphed(&made);
  for (int epoch = 0; epoch < 6; ++epoch) {
    for (int64_t rows : {8, 8, 8, 8, 3}) step.run(batch_of(rows, static_cast<uint64_t>(epoch * 10 + rows)));
  }
  EXPECT_EQ(step.captures(), 1);
  EXPECT_EQ(step.eager_steps(), 2 + 6);
}

TEST(GraphedStep, AShapeThatStaysIsCapturedAgainInTheSameGraph) {
  int made = 0;
  Loop graphed(true), eager(true);
  GraphedStep step = graphed.graphed(&made);
  std::vector<Ran> ran;
  for (uint64_t i = 0; i < 8; ++i) {
    const data::Batch b = batch_of(i < 4 ? 8 : 6, 300 + i);
    ran.push_back(step.run(b));
    eager.body(b);
  }
  expect_same_weights(graphed.model, eager.model);
  EXPECT_EQ(ran, (std::vector<Ran>{Ran::Eager, Ran::Eager, Ran::Captured, Ran::Replayed, Ran::Eager,
                                   Ran::Eager, Ran::Captured, Ran::Replayed}));
  EXPECT_EQ(step.captures(), 2);
  EXPECT_EQ(made, 1) << "a re-capture reuses the graph (an update in place where CUDA can)";
  EXPECT_EQ(step.recaptures(), 0) << "a new shape is not a re-capture of a stale graph";
}

TEST(GraphedStep, AReplacedPersistentTensorMeansOneEagerStepAndANewCapture) {
  int made = 0;
  Loop loop(true);
  std::vector<Tensor> kept = {zeros({3})};  // say, a running sum the body adds into
  GraphedStep step(
      Device::cpu(), [&](const data::Batch& b) { loop.body(b); },
      GraphedStepOptions{.warmup_steps = 2,
                         .optimizer = loop.sgd.get(),
                         .persistent = [&] { return kept; },
                         .make_graph = recording_graphs(&made)});
  std::vector<Ran> ran;
  for (uint64_t i = 0; i < 7; ++i) {
    if (i == 4) kept[0] = zeros({3});  // replaced, where it should have been zeroed in place
    if (i == 6) kept[0].zero_();       // in place: the graph still matches
    ran.push_back(step.run(batch_of(8, 400 + i)));
  }
  EXPECT_EQ(ran, (std::vector<Ran>{Ran::Eager, Ran::Eager, Ran::Captured, Ran::Replayed, Ran::Eager,
                                   Ran::Captured, Ran::Replayed}));
  EXPECT_EQ(step.recaptures(), 1);
  EXPECT_NE(step.last_recapture_reason().find("was replaced"), std::string::npos)
      << step.last_recapture_reason();
}

TEST(GraphedStep, AChangedOptimizerOptionMeansANewCapture) {
  int made = 0;
  Loop graphed(true), eager(true);
  GraphedStep step = graphed.graphed(&made);
  std::vector<Ran> ran;
  for (uint64_t i = 0; i < 7; ++i) {
    if (i == 4) {
      graphed.sgd->param_groups()[0].set("weight_decay", 1e-2);  // frozen into the capture
      eager.sgd->param_groups()[0].set("weight_decay", 1e-2);
    }
    if (i == 5) {  // the lr is not: it is written before each replay
      graphed.sgd->param_groups()[0].set_lr(0.01);
      eager.sgd->param_groups()[0].set_lr(0.01);
    }
    const data::Batch b = batch_of(8, 500 + i);
    ran.push_back(step.run(b));
    eager.body(b);
    expect_same_weights(graphed.model, eager.model);
  }
  EXPECT_EQ(ran, (std::vector<Ran>{Ran::Eager, Ran::Eager, Ran::Captured, Ran::Replayed, Ran::Eager,
                                   Ran::Captured, Ran::Replayed}));
  EXPECT_EQ(step.recaptures(), 1);
  EXPECT_NE(step.last_recapture_reason().find("options other than lr"), std::string::npos);
}

// State made during the capture (say a parameter's optimizer moments, at its first
// gradient) is initialised by the recording: the graph runs that one step, and the key is
// captured again once the state exists.
TEST(GraphedStep, StateMadeDuringTheCaptureMeansAnotherCapture) {
  std::vector<Tensor> kept = {zeros({3})};
  struct MakingGraph final : train::StepGraph {
    std::function<void()> body;
    std::vector<Tensor>* kept;
    int captures = 0;
    explicit MakingGraph(std::vector<Tensor>* k) : kept(k) {}
    void capture(const std::function<void()>& b) override {
      body = b;
      if (captures++ == 0) kept->push_back(zeros({2}));  // made by the first capture only
    }
    void replay() override { body(); }
  };
  int64_t bodies = 0;
  GraphedStep step(Device::cpu(), [&](const data::Batch&) { ++bodies; },
                   GraphedStepOptions{.warmup_steps = 1, .persistent = [&] { return kept; },
                                      .make_graph = [&](Device) -> std::unique_ptr<train::StepGraph> {
                                        return std::make_unique<MakingGraph>(&kept);
                                      }});
  std::vector<Ran> ran;
  for (uint64_t i = 0; i < 5; ++i) ran.push_back(step.run(batch_of(4, i)));
  EXPECT_EQ(ran, (std::vector<Ran>{Ran::Eager, Ran::Captured, Ran::Eager, Ran::Captured, Ran::Replayed}));
  EXPECT_EQ(bodies, 5) << "every step ran once: the captured ones by their replay";
  EXPECT_EQ(step.recaptures(), 1);
  EXPECT_NE(step.last_recapture_reason().find("made new state during its capture"), std::string::npos)
      << step.last_recapture_reason();
}

// The caller's signature (host values the capture froze) and a persistent tensor's
// requires_grad are checked at every replay too.
TEST(GraphedStep, AChangedSignatureOrRequiresGradMeansANewCapture) {
  int made = 0;
  double factor = 2.0;
  std::vector<Tensor> kept = {zeros({3})};
  GraphedStep step(Device::cpu(), [](const data::Batch&) {},
                   GraphedStepOptions{.warmup_steps = 1, .persistent = [&] { return kept; },
                                      .signature = [&] { return std::vector<double>{factor}; },
                                      .make_graph = recording_graphs(&made)});
  std::vector<Ran> ran;
  for (uint64_t i = 0; i < 8; ++i) {
    if (i == 3) factor = 4.0;
    if (i == 6) kept[0].requires_grad_(true);
    ran.push_back(step.run(batch_of(4, i)));
  }
  EXPECT_EQ(ran, (std::vector<Ran>{Ran::Eager, Ran::Captured, Ran::Replayed, Ran::Eager, Ran::Captured,
                                   Ran::Replayed, Ran::Eager, Ran::Captured}));
  EXPECT_EQ(step.recaptures(), 2);
}

TEST(GraphedStep, ACaptureThatThrowsLeavesNothingReplaying) {
  int made = 0;
  int64_t calls = 0;
  GraphedStep step(
      Device::cpu(), [&](const data::Batch&) { ++calls; },
      GraphedStepOptions{.warmup_steps = 1, .make_graph = [&](Device) -> std::unique_ptr<train::StepGraph> {
                           struct Throwing final : train::StepGraph {
                             void capture(const std::function<void()>&) override {
                               throw Error(
                                   "CUDA graph capture: item() on cuda:0 while a graph is being captured");
                             }
                             void replay() override { ADD_FAILURE() << "replayed a failed capture"; }
                           };
                           ++made;
                           return std::make_unique<Throwing>();
                         }});
  const data::Batch b = batch_of(4, 1);
  EXPECT_EQ(step.run(b), Ran::Eager);
  EXPECT_KILN_ERROR(step.run(b), "CUDA graph capture", "item()");
  EXPECT_EQ(step.captures(), 0);
  EXPECT_KILN_ERROR(step.run(b), "CUDA graph capture");  // tried again, never replayed
  EXPECT_EQ(calls, 1);
}

TEST(GraphedStep, WithoutGraphsEveryStepIsEager) {
  Loop loop(true);
  GraphedStep step(Device::cpu(), [&](const data::Batch& b) { loop.body(b); }, {.optimizer = loop.sgd.get()});
  EXPECT_FALSE(step.graphs_available());
  for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ(step.run(batch_of(8, i)), Ran::Eager);
  EXPECT_EQ(step.captures(), 0);
  EXPECT_EQ(loop.bodies, 6);
}

TEST(GraphedStep, MisusesAreNamedErrors) {
  Loop loop(false);
  const GraphedStep::Body body = [](const data::Batch&) {};
  EXPECT_KILN_ERROR(GraphedStep(Device::cpu(), body, {.optimizer = loop.sgd.get()}), "not capturable",
                    "set_capturable(true)");
  EXPECT_KILN_ERROR(GraphedStep(Device::cpu(), body, {.warmup_steps = 0}), "warmup_steps must be at least 1");
  EXPECT_KILN_ERROR(GraphedStep(Device::cpu(), nullptr), "no step body");
  GraphedStep step(Device::cpu(), body);
  data::Batch b;
  b.tensors.emplace("image", Tensor());
  EXPECT_KILN_ERROR(step.run(b), "\"image\" is undefined");
  int made = 0;
  GraphedStep graphed(Device::cpu(), body, {.warmup_steps = 1, .make_graph = recording_graphs(&made)});
  data::Batch strided;
  strided.tensors.emplace("image", randn({4, 6}).transpose(0, 1));
  EXPECT_EQ(graphed.run(strided), Ran::Eager);
  EXPECT_KILN_ERROR(graphed.run(strided), "\"image\"", "is not contiguous", "another layout");
}

}  // namespace
}  // namespace kiln
