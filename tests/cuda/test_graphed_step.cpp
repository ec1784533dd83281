// A whole training step as one CUDA graph (train/graphed_step.h, Note [A graphed step]) on
// a GPU: N steps through GraphedStep (warm-up, capture, replays, an eager one-off batch)
// leave bit-identical weights, batch-norm statistics, optimizer state, GradScaler scale and
// summed losses to N eager steps, with dropout on, float16 autocast, clipping and a
// one-cycle schedule moving lr and beta1; device memory stays flat over many replays; a
// batch shape that stays re-captures; a host sync in the step is the named error; and
// kiln train --cuda-graphs trains exactly as kiln train does. cuDNN runs its deterministic
// algorithms throughout (a non-deterministic backward would differ between any two runs,
// graphed or not). Skips without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <sstream>

#include "core/autocast.h"
#include "core/cudnn.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/test_util.h"
#include "tests/train/tiny_run.h"
#include "train/graphed_step.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::kCuda;
using train::GraphedStep;
using Ran = GraphedStep::Ran;

constexpr int64_t kClasses = 3;

std::shared_ptr<nn::Sequential> make_net() {
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<nn::Conv3d>(nn::Conv3dOptions{.in_channels = 1, .out_channels = 4,
                                                                .kernel_size = {3, 3, 3}, .padding = {1, 1, 1},
                                                                .bias = false}));
  net->push_back(std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = 4}));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::Dropout>(nn::DropoutOptions{.p = 0.3}));
  net->push_back(std::make_shared<nn::AdaptiveAvgPool3d>(nn::AdaptiveAvgPool3dOptions{.output_size = {1, 1, 1}}));
  net->push_back(std::make_shared<nn::Flatten>());
  net->push_back(std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = kClasses}));
  return net;
}

// The batches of a run: fixed by their index, of `rows` samples each.
data::Batch batch_at(int64_t step, int64_t rows) {
  Generator g(1000 + static_cast<uint64_t>(step));
  data::Batch b;
  b.tensors.emplace("image", randn({rows, 1, 6, 6, 6}, {}, &g).to(kCuda));
  b.tensors.emplace("label", randint(0, kClasses, {rows}, {}, &g).to(kCuda));
  return b;
}

// A training loop's state and its step, with or without a GraphedStep.
struct Loop {
  std::shared_ptr<nn::Sequential> net;
  std::unique_ptr<optim::AdamW> adam;
  std::unique_ptr<optim::OneCycleLR> schedule;
  optim::GradScaler scaler;
  Tensor loss_sum;
  std::unique_ptr<GraphedStep> graphed;

  Loop(bool use_graphs, int64_t total_steps) {
    manual_seed(7);  // the initialisation, then dropout's stream on the GPU
    net = make_net();
    net->to(kCuda);
    adam = std::make_unique<optim::AdamW>(net->parameters(), optim::AdamWOptions{.lr = 1e-2});
    schedule = std::make_unique<optim::OneCycleLR>(*adam, optim::OneCycleLROptions{.max_lr = 3e-2,
                                                                                    .total_steps = total_steps});
    loss_sum = zeros({}, {.dtype = DType::Float32, .device = kCuda});
    if (use_graphs) {
      adam->set_capturable(true);
      graphed = std::make_unique<GraphedStep>(
          kCuda, [this](const data::Batch& b) { body(b); },
          train::GraphedStepOptions{.warmup_steps = 2, .optimizer = adam.get(), .persistent = [this] {
            std::vector<Tensor> kept = net->parameters();
            for (const Tensor& t : net->buffers()) kept.push_back(t);
            for (const Tensor& t : scaler.persistent_tensors()) kept.push_back(t);
            kept.push_back(loss_sum);
            return kept;
          }});
    }
  }
  void body(const data::Batch& b) {
    Tensor loss;
    {
      const AutocastGuard autocast(DType::Float16, true);
      loss = cross_entropy(net->forward(b.at("image")), b.at("label"));
    }
    scaler.scale(loss).backward();
    scaler.unscale_(*adam);
    optim::clip_grad_norm_(adam->master_params(), 1.0);
    scaler.step(*adam);
    scaler.update();
    adam->zero_grad();
    const NoGradGuard no_grad;
    loss_sum.add_(loss.detach());
  }
  Ran step(const data::Batch& b) {
    Ran ran = Ran::Eager;
    if (graphed) {
      ran = graphed->run(b);
    } else {
      body(b);
    }
    schedule->step();
    return ran;
  }
};

void expect_same_state(Loop& a, Loop& b) {
  const nn::NamedTensors pa = a.net->named_parameters(), pb = b.net->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(all_equal(pa[i].second, pb[i].second)) << pa[i].first;
    for (const char* name : {"exp_avg", "exp_avg_sq", "step"}) {
      EXPECT_TRUE(all_equal(a.adam->state(pa[i].second).at(name), b.adam->state(pb[i].second).at(name)))
          << pa[i].first << " " << name;
    }
  }
  const nn::NamedTensors ba = a.net->named_buffers(), bb = b.net->named_buffers();
  for (size_t i = 0; i < ba.size(); ++i) EXPECT_TRUE(all_equal(ba[i].second, bb[i].second)) << ba[i].first;
  EXPECT_EQ(a.scaler.get_scale(), b.scaler.get_scale());
  EXPECT_TRUE(all_equal(a.loss_sum, b.loss_sum));
}

TEST(CudaGraphedStep, ReplayedStepsAreBitIdenticalToEagerSteps) {
  KILN_REQUIRE_CUDA();
  const cudnn::ScopedMode deterministic(/*benchmark=*/false, /*deterministic=*/true);
  constexpr int64_t kSteps = 12;
  const auto rows = [](int64_t step) { return step == 7 ? 5 : 8; };  // one shorter batch mid-run
  Loop eager(false, kSteps);
  for (int64_t i = 0; i < kSteps; ++i) eager.step(batch_at(i, rows(i)));
  Loop graphed(true, kSteps);
  std::vector<Ran> ran;
  for (int64_t i = 0; i < kSteps; ++i) ran.push_back(graphed.step(batch_at(i, rows(i))));
  EXPECT_EQ(ran[0], Ran::Eager);
  EXPECT_EQ(ran[2], Ran::Captured);
  EXPECT_EQ(ran[7], Ran::Eager);
  EXPECT_EQ(ran[8], Ran::Replayed);
  EXPECT_EQ(graphed.graphed->captures(), 1);
  EXPECT_EQ(graphed.graphed->replays(), kSteps - 3);
  expect_same_state(eager, graphed);
}

TEST(CudaGraphedStep, DeviceMemoryStaysFlatOverManyReplays) {
  KILN_REQUIRE_CUDA();
  Loop loop(true, 200);
  const data::Batch b = batch_at(0, 8);
  for (int i = 0; i < 10; ++i) loop.step(b);
  synchronize(kCuda);
  const AllocatorStats before = memory_stats(kCuda);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(loop.step(b), Ran::Replayed);
  synchronize(kCuda);
  const AllocatorStats after = memory_stats(kCuda);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
}

TEST(CudaGraphedStep, AShapeThatStaysIsCapturedAgainAndStillMatchesEager) {
  KILN_REQUIRE_CUDA();
  const cudnn::ScopedMode deterministic(/*benchmark=*/false, /*deterministic=*/true);
  constexpr int64_t kSteps = 10;
  const auto rows = [](int64_t step) { return step < 5 ? 8 : 4; };
  Loop eager(false, kSteps);  // each loop seeds the generators: the graphed one is made after
  for (int64_t i = 0; i < kSteps; ++i) eager.step(batch_at(i, rows(i)));
  Loop graphed(true, kSteps);
  for (int64_t i = 0; i < kSteps; ++i) graphed.step(batch_at(i, rows(i)));
  EXPECT_EQ(graphed.graphed->captures(), 2);
  expect_same_state(eager, graphed);
}

TEST(CudaGraphedStep, AHostSyncInTheStepIsTheNamedError) {
  KILN_REQUIRE_CUDA();
  Loop loop(true, 10);
  GraphedStep reading(
      kCuda,
      [&](const data::Batch& b) {
        loop.body(b);
        (void)loop.loss_sum.item<double>();  // fine eagerly; impossible in a capture
      },
      {.warmup_steps = 1, .optimizer = loop.adam.get()});
  const data::Batch b = batch_at(0, 8);
  EXPECT_EQ(reading.run(b), Ran::Eager);
  EXPECT_KILN_ERROR(reading.run(b), "CUDA graph capture", "item()");
  EXPECT_EQ(reading.captures(), 0);
  EXPECT_GT(sum(loop.net->parameters()[0]).item<double>(), -1e30);  // eager work goes on
}

TEST(CudaGraphedStep, KilnTrainWithCudaGraphsTrainsExactlyAsWithout) {
  KILN_REQUIRE_CUDA();
  testing::TempFolder folder;
  train::TrainConfig config = testing::tiny_run_config(folder.file("eager"));
  config.device = "cuda";
  config.size = 12;
  config.synthetic_samples = 68;  // batches of 8 and a last one of 4
  config.epochs = 2;
  config.amp = "O1";
  config.clip_grad_norm = 1.0;
  config.scheduler = "onecycle";
  config.dropout = 0.2;
  config.log_every = 3;
  config.deterministic = true;
  train::TrainConfig graphs = config;
  graphs.out = folder.file("graphed");
  graphs.cuda_graphs = true;
  nn::StateDict eager_weights, graphed_weights;
  std::string graphed_output;
  for (auto* run : {&config, &graphs}) {
    testing::with_watchdog(std::chrono::seconds(300), [&] {
      const train::TrainData data = train::make_train_data(*run);
      std::ostringstream out;
      train::Trainer trainer(*run, data, train::make_model(*run, data).model, {.out = &out});
      trainer.fit();
      (run == &config ? eager_weights : graphed_weights) = trainer.model().state_dict();
      if (run == &graphs) graphed_output = out.str();
    });
  }
  EXPECT_NE(graphed_output.find("cuda graphs: "), std::string::npos) << graphed_output;
  EXPECT_NE(graphed_output.find("graphed"), std::string::npos) << "the report's phase";
  ASSERT_EQ(eager_weights.size(), graphed_weights.size());
  for (size_t i = 0; i < eager_weights.size(); ++i)
    EXPECT_TRUE(all_equal(eager_weights[i].second, graphed_weights[i].second)) << eager_weights[i].first;
}

}  // namespace
}  // namespace kiln
