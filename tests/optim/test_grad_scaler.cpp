// GradScaler: PyTorch's defaults, skipped steps on Inf/NaN with the scale backing off,
// growth after growth_interval clean steps, unscale_ before clipping, gradient
// accumulation, master weights, the disabled pass-through, misuse errors and state_dict.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/ops.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "tests/test_util.h"

namespace kiln::optim {
namespace {

// A tiny least-squares problem: loss = mean((x w - y)^2) for a [4, 3] x and w [3, 2].
struct Problem {
  Tensor x = testing::random_uniform({4, 3}, -1, 1, DType::Float32, 1);
  Tensor y = testing::random_uniform({4, 2}, -1, 1, DType::Float32, 2);
  Tensor loss(const Tensor& w) const { return mean(square(sub(matmul(x, w), y))); }
};

Tensor make_param(uint64_t seed, DType dtype = DType::Float32) {
  return testing::random_uniform({3, 2}, -1, 1, dtype, seed).requires_grad_();
}

std::vector<float> values(const Tensor& t) { return t.detach().to(DType::Float32).to_vector<float>(); }

TEST(GradScaler, DefaultsArePyTorchs) {
  const GradScalerOptions options;
  EXPECT_EQ(options.init_scale, 65536.0);
  EXPECT_EQ(options.growth_factor, 2.0);
  EXPECT_EQ(options.backoff_factor, 0.5);
  EXPECT_EQ(options.growth_interval, 2000);
  EXPECT_TRUE(options.enabled);
  EXPECT_EQ(GradScaler().get_scale(), 65536.0);
}

TEST(GradScaler, ScaleMultipliesTheLossAndItsGradients) {
  Problem problem;
  Tensor w = make_param(3);
  GradScaler scaler;
  const Tensor loss = problem.loss(w);
  const Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.dim(), 0);
  EXPECT_FLOAT_EQ(scaled.item<float>(), loss.item<float>() * 65536.0f);
  scaled.backward();
  const std::vector<float> scaled_grad = values(w.grad());
  w.set_grad(Tensor());
  problem.loss(w).backward();
  const std::vector<float> grad = values(w.grad());
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_FLOAT_EQ(scaled_grad[i], grad[i] * 65536.0f);
}

// A power-of-two scale is exact in floating point, so training with a scaler (and no
// overflow) gives bit-identical parameters to training without one.
TEST(GradScaler, CleanTrainingMatchesUnscaledTrainingExactly) {
  Problem problem;
  for (bool unscale_first : {false, true}) {
    Tensor a = make_param(4), b = make_param(4);
    SGD plain({a}, {.lr = 0.1, .momentum = 0.9});
    SGD scaled({b}, {.lr = 0.1, .momentum = 0.9});
    GradScaler scaler;
    for (int step = 0; step < 5; ++step) {
      problem.loss(a).backward();
      plain.step();
      plain.zero_grad();
      scaler.scale(problem.loss(b)).backward();
      if (unscale_first) scaler.unscale_(scaled);
      scaler.step(scaled);
      scaler.update();
      scaled.zero_grad();
    }
    EXPECT_EQ(values(a), values(b)) << "unscale_first " << unscale_first;
    EXPECT_EQ(scaler.get_scale(), 65536.0);
  }
}

TEST(GradScaler, InfGradientSkipsTheStepAndHalvesTheScale) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Tensor w = make_param(5);
    Adam adam({w}, {.lr = 0.1});
    GradScaler scaler;
    Problem problem;
    scaler.scale(problem.loss(w)).backward();
    // Inject a non-finite gradient element.
    Tensor grad = w.grad();
    grad.view({-1}).narrow(0, 3, 1).fill_(bad);
    const std::vector<float> before = values(w);
    scaler.step(adam);
    scaler.update();
    EXPECT_EQ(values(w), before) << "the step must be skipped";
    const ParamState& state = adam.state(w);
    if (state.count("step")) {
      EXPECT_EQ(state.at("step").item<float>(), 0.0f) << "the step counter must not advance";
    }
    EXPECT_EQ(scaler.get_scale(), 32768.0);

    // The next, clean step goes through with the smaller scale.
    adam.zero_grad();
    scaler.scale(problem.loss(w)).backward();
    scaler.step(adam);
    scaler.update();
    EXPECT_NE(values(w), before);
    EXPECT_EQ(adam.state(w).at("step").item<float>(), 1.0f);
    EXPECT_EQ(scaler.get_scale(), 32768.0);
  }
}

TEST(GradScaler, GrowsAfterGrowthIntervalCleanStepsAndBackoffResetsTheCount) {
  Tensor w = make_param(6);
  SGD sgd({w}, {.lr = 1e-3});
  GradScaler scaler({.init_scale = 8.0, .growth_factor = 2.0, .backoff_factor = 0.25, .growth_interval = 3});
  Problem problem;
  auto iteration = [&](bool inject_inf) {
    sgd.zero_grad();
    scaler.scale(problem.loss(w)).backward();
    if (inject_inf) w.grad().view({-1}).narrow(0, 0, 1).fill_(std::numeric_limits<float>::infinity());
    scaler.step(sgd);
    scaler.update();
    return scaler.get_scale();
  };
  EXPECT_EQ(iteration(false), 8.0);
  EXPECT_EQ(iteration(false), 8.0);
  EXPECT_EQ(iteration(false), 16.0);  // third clean step in a row
  EXPECT_EQ(iteration(false), 16.0);
  EXPECT_EQ(iteration(true), 4.0);    // backoff, and the clean count restarts
  EXPECT_EQ(iteration(false), 4.0);
  EXPECT_EQ(iteration(false), 4.0);
  EXPECT_EQ(iteration(false), 8.0);
}

TEST(GradScaler, UnscaleBeforeClippingClipsTheTrueGradients) {
  Problem problem;
  Tensor a = make_param(7), b = make_param(7);
  SGD plain({a}, {.lr = 0.5});
  SGD scaled({b}, {.lr = 0.5});
  GradScaler scaler({.init_scale = 1024.0});
  problem.loss(a).backward();
  const double true_norm = clip_grad_norm_({a}, 0.01).item<double>();
  plain.step();
  scaler.scale(problem.loss(b)).backward();
  scaler.unscale_(scaled);
  const double norm = clip_grad_norm_({b}, 0.01).item<double>();
  scaler.step(scaled);
  scaler.update();
  EXPECT_NEAR(norm, true_norm, 1e-6 * true_norm);
  const std::vector<float> va = values(a), vb = values(b);
  for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-6);
}

TEST(GradScaler, WorksWithGradientAccumulation) {
  Problem problem;
  Tensor a = make_param(8), b = make_param(8);
  SGD plain({a}, {.lr = 0.1});
  SGD scaled({b}, {.lr = 0.1});
  GradScaler scaler;
  constexpr int kMicroBatches = 3;
  for (int k = 0; k < kMicroBatches; ++k) {
    div(problem.loss(a), kMicroBatches).backward();
    scaler.scale(div(problem.loss(b), kMicroBatches)).backward();
  }
  plain.step();
  scaler.step(scaled);
  scaler.update();
  EXPECT_EQ(values(a), values(b));
}

TEST(GradScaler, MasterWeightsGetTheUnscaledGradients) {
  Problem problem;
  Tensor reference = make_param(9, DType::Float32);
  Tensor half = reference.detach().to(DType::Float16).requires_grad_();
  Tensor master_twin = half.detach().to(DType::Float32).requires_grad_();
  SGD sgd({half}, {.lr = 0.1});
  sgd.enable_master_weights();
  SGD twin({master_twin}, {.lr = 0.1});
  GradScaler scaler;
  scaler.scale(problem.loss(half.to(DType::Float32))).backward();
  // The twin gets the same float16 gradient, converted to float32 exactly.
  master_twin.set_grad(half.grad().to(DType::Float32).div(scalar_tensor(65536.0, {.dtype = DType::Float32})));
  scaler.step(sgd);
  scaler.update();
  twin.step();
  EXPECT_EQ(values(half), values(master_twin.to(DType::Float16)));
}

TEST(GradScaler, BFloat16DoesNotNeedItButItIsHarmless) {
  Problem problem;
  Tensor a = make_param(10, DType::BFloat16), b = make_param(10, DType::BFloat16);
  SGD plain({a}, {.lr = 0.1});
  SGD scaled({b}, {.lr = 0.1});
  GradScaler scaler;
  for (int step = 0; step < 3; ++step) {
    problem.loss(a.to(DType::Float32)).backward();
    plain.step();
    plain.zero_grad();
    scaler.scale(problem.loss(b.to(DType::Float32))).backward();
    scaler.step(scaled);
    scaler.update();
    scaled.zero_grad();
  }
  EXPECT_EQ(values(a), values(b));
}

TEST(GradScaler, DisabledIsAPassThrough) {
  Problem problem;
  Tensor a = make_param(11), b = make_param(11);
  SGD plain({a}, {.lr = 0.1});
  SGD passed({b}, {.lr = 0.1});
  GradScaler scaler({.enabled = false});
  const Tensor loss = problem.loss(b);
  const Tensor scaled = scaler.scale(loss);
  EXPECT_TRUE(scaled.is_same(loss));
  scaled.backward();
  scaler.unscale_(passed);
  scaler.step(passed);
  scaler.update();
  problem.loss(a).backward();
  plain.step();
  EXPECT_EQ(values(a), values(b));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().as_object().empty());
}

TEST(GradScaler, MisuseIsAClearError) {
  Problem problem;
  Tensor w = make_param(12);
  SGD sgd({w}, {.lr = 0.1});
  GradScaler scaler;
  EXPECT_THROW(scaler.step(sgd), Error);  // no scale() yet
  scaler.scale(problem.loss(w)).backward();
  EXPECT_THROW(scaler.update(), Error);   // nothing stepped
  scaler.unscale_(sgd);
  EXPECT_KILN_ERROR(scaler.unscale_(sgd), "already called");
  scaler.step(sgd);
  EXPECT_KILN_ERROR(scaler.step(sgd), "already called");
  EXPECT_KILN_ERROR(scaler.unscale_(sgd), "after step()");
  scaler.update();
  EXPECT_THROW(GradScaler({.growth_factor = 1.0}), Error);
  EXPECT_THROW(GradScaler({.backoff_factor = 1.0}), Error);
  EXPECT_THROW(GradScaler({.growth_interval = 0}), Error);
  EXPECT_THROW(GradScaler({.init_scale = -1.0}), Error);
  EXPECT_THROW(scaler.update(0.0), Error);
}

TEST(GradScaler, StateDictRoundTrips) {
  Tensor w = make_param(13);
  SGD sgd({w}, {.lr = 1e-3});
  GradScaler scaler({.init_scale = 64.0, .growth_interval = 5});
  Problem problem;
  for (int i = 0; i < 3; ++i) {
    sgd.zero_grad();
    scaler.scale(problem.loss(w)).backward();
    scaler.step(sgd);
    scaler.update();
  }
  const json::Value state = scaler.state_dict();
  EXPECT_EQ(state.find("scale")->as_number(), 64.0);
  EXPECT_EQ(state.find("_growth_tracker")->as_integer(), 3);
  EXPECT_EQ(state.find("growth_interval")->as_integer(), 5);

  // A fresh scaler restored from it grows at the same step as the original.
  GradScaler restored;
  restored.load_state_dict(json::parse(json::dump(state)));
  EXPECT_EQ(restored.get_scale(), 64.0);
  for (GradScaler* s : {&scaler, &restored}) {
    for (int i = 0; i < 2; ++i) {
      sgd.zero_grad();
      s->scale(problem.loss(w)).backward();
      s->step(sgd);
      s->update();
    }
    EXPECT_EQ(s->get_scale(), 128.0);
  }

  GradScaler other;
  EXPECT_KILN_ERROR(other.load_state_dict(json::Value::object()), "empty");
  EXPECT_KILN_ERROR(other.load_state_dict(json::parse(R"({"scale": 2.0})")), "growth_factor");
  EXPECT_THROW(other.load_state_dict(json::parse(
                   R"({"scale": "x", "growth_factor": 2, "backoff_factor": 0.5, "growth_interval": 3, "_growth_tracker": 0})")),
               Error);
  EXPECT_KILN_ERROR(other.load_state_dict(json::parse(
            R"({"scale": 2.0, "growth_factor": 2, "backoff_factor": 0.5, "growth_interval": 3, "_growth_tracker": 7})")), "_growth_tracker");
  EXPECT_EQ(other.get_scale(), 65536.0) << "a failed load changes nothing";
}

}  // namespace
}  // namespace kiln::optim
