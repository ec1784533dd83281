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
  EXPECT_EQ(options.min_scale, 0x1p-24);  // Kiln's own (Note [GradScaler min_scale])
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

// PyTorch 2.x's scale is a float32 [] tensor, and so is ours as the loss sees it: a
// float16 [] loss is scaled into float32 (zero-dim operands promote: 20 * 4096 = 81920 is
// past float16's largest value, 65504), a float16 loss with dimensions stays float16. The
// gradient reaches a float16 leaf as d(loss * scale) = scale.
TEST(GradScaler, ScaledLossDtypeFollowsPyTorchsPromotion) {
  GradScaler scaler({.init_scale = 4096.0});
  for (const DType dtype : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor x = full({}, 20.0, {.dtype = dtype}).requires_grad_();
    const Tensor scaled = scaler.scale(x);
    EXPECT_EQ(scaled.dtype(), DType::Float32);
    EXPECT_EQ(scaled.dim(), 0);
    EXPECT_EQ(scaled.item<float>(), 81920.0f);
    scaled.backward();
    EXPECT_EQ(x.grad().dtype(), dtype);
    EXPECT_EQ(x.grad().item<float>(), 4096.0f);
    const Tensor per_sample = full({3}, 2.0, {.dtype = dtype});
    EXPECT_EQ(scaler.scale(per_sample).dtype(), dtype);
    EXPECT_EQ(scaler.scale(per_sample).sizes(), std::vector<int64_t>{3});
  }
  EXPECT_EQ(scaler.scale(full({2}, 2.0, {.dtype = DType::Float64})).dtype(), DType::Float64);
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
    // The state is created on the device (the skip is decided there), but nothing moves.
    const ParamState& state = adam.state(w);
    ASSERT_EQ(state.count("step"), 1u);
    EXPECT_EQ(state.at("step").item<float>(), 0.0f) << "the step counter must not advance";
    EXPECT_TRUE(testing::all_equal(state.at("exp_avg"), zeros_like(w))) << "nor the moments";
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

// Note [GradScaler min_scale]: 200 overflowing steps in a row would halve the scale from
// 2^16 to 0 (float32 rounds 2^-150 to 0 at the 166th), and the next finite step would
// then unscale by 1/0 and write 0 * inf = NaN into the weights. With the floor the scale
// stops at 2^-24, the skipped steps leave the model alone, and the next finite step is the
// plain step exactly (a power-of-two scale is exact).
TEST(GradScaler, LongOverflowRunStopsAtMinScaleAndTheNextStepIsFinite) {
  Problem problem;
  Tensor w = make_param(15), reference = make_param(15);
  SGD sgd({w}, {.lr = 0.1});
  SGD plain({reference}, {.lr = 0.1});
  GradScaler scaler;
  const std::vector<float> before = values(w);
  for (int step = 0; step < 200; ++step) {
    sgd.zero_grad();
    scaler.scale(problem.loss(w)).backward();
    w.grad().view({-1}).narrow(0, step % 6, 1).fill_(std::numeric_limits<float>::infinity());
    scaler.step(sgd);
    scaler.update();
    ASSERT_GE(scaler.get_scale(), 0x1p-24) << "step " << step;
  }
  EXPECT_EQ(scaler.get_scale(), 0x1p-24);
  EXPECT_EQ(values(w), before) << "every overflowing step must be skipped";

  sgd.zero_grad();
  scaler.scale(problem.loss(w)).backward();
  scaler.step(sgd);
  scaler.update();
  problem.loss(reference).backward();
  plain.step();
  for (float v : values(w)) ASSERT_TRUE(std::isfinite(v)) << v;
  EXPECT_EQ(values(w), values(reference));
  EXPECT_EQ(scaler.get_scale(), 0x1p-24);
}

TEST(GradScaler, MinScaleIsValidatedAndKeptUnderTheScale) {
  for (double bad :
       {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_KILN_ERROR(GradScaler({.min_scale = bad}), "GradScaler", "min_scale must be finite and > 0");
  }
  EXPECT_KILN_ERROR(GradScaler({.init_scale = 4.0, .min_scale = 8.0}), "GradScaler", "min_scale 8",
                    "init_scale 4");
  EXPECT_NO_THROW(GradScaler({.init_scale = 4.0, .min_scale = 4.0}));

  Tensor w = make_param(16);
  SGD sgd({w}, {.lr = 1e-3});
  GradScaler scaler({.init_scale = 64.0, .min_scale = 1.0});
  scaler.set_min_scale(0.5);
  EXPECT_EQ(scaler.options().min_scale, 0.5);
  EXPECT_KILN_ERROR(scaler.set_min_scale(0.0), "GradScaler", "min_scale", "got 0");
  EXPECT_KILN_ERROR(scaler.set_min_scale(128.0), "GradScaler", "min_scale 128", "init_scale 64");
  Problem problem;
  for (int step = 0; step < 10; ++step) {  // 64 -> 32 -> ... -> 0.5, then stays
    sgd.zero_grad();
    scaler.scale(problem.loss(w)).backward();
    w.grad().view({-1}).narrow(0, 0, 1).fill_(std::numeric_limits<float>::quiet_NaN());
    scaler.step(sgd);
    scaler.update();
  }
  EXPECT_EQ(scaler.get_scale(), 0.5);
  // The scale has backed off below init_scale: the floor may not rise above it.
  EXPECT_KILN_ERROR(scaler.set_min_scale(2.0), "GradScaler.set_min_scale", "min_scale 2",
                    "current scale 0.5");
  EXPECT_EQ(scaler.options().min_scale, 0.5) << "a rejected value changes nothing";
  EXPECT_KILN_ERROR(scaler.update(0.25), "GradScaler.update", "new_scale 0.25", "below min_scale 0.5");
  scaler.update(2.0);
  EXPECT_EQ(scaler.get_scale(), 2.0);
}

// min_scale travels in Kiln's state dict as one extra key; PyTorch's state dicts, which
// lack it, load and keep the scaler's own floor, unless their scale is below that floor.
TEST(GradScaler, MinScaleInTheStateDictStaysCompatibleWithPyTorchs) {
  const json::Value state = GradScaler({.init_scale = 64.0, .min_scale = 0.125}).state_dict();
  EXPECT_EQ(state.find("min_scale")->as_number(), 0.125);
  GradScaler restored;
  restored.load_state_dict(json::parse(json::dump(state)));
  EXPECT_EQ(restored.options().min_scale, 0.125);
  EXPECT_EQ(restored.get_scale(), 64.0);
  // Default min_scale survives the text round trip exactly.
  GradScaler defaults;
  defaults.load_state_dict(json::parse(json::dump(GradScaler().state_dict())));
  EXPECT_EQ(defaults.options().min_scale, 0x1p-24);

  const char* pytorch_state =
      R"({"scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000, "_growth_tracker": 7})";
  GradScaler from_pytorch({.min_scale = 0.25});
  from_pytorch.load_state_dict(json::parse(pytorch_state));
  EXPECT_EQ(from_pytorch.get_scale(), 1024.0);
  EXPECT_EQ(from_pytorch.options().min_scale, 0.25);
  const char* collapsed_pytorch_state =
      R"({"scale": 1e-30, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000, "_growth_tracker": 0})";
  EXPECT_KILN_ERROR(from_pytorch.load_state_dict(json::parse(collapsed_pytorch_state)),
                    "GradScaler.load_state_dict", "scale 1e-30", "below min_scale 0.25", "set_min_scale");
  EXPECT_EQ(from_pytorch.get_scale(), 1024.0) << "a failed load changes nothing";
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
  // As PyTorch, a disabled scaler ignores a state dict, even the empty one it saves.
  scaler.load_state_dict(scaler.state_dict());
  scaler.load_state_dict(GradScaler({.init_scale = 8.0}).state_dict());
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_FALSE(scaler.is_enabled());
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

TEST(GradScaler, SettersChangeTheNextUpdateAndRejectBadValues) {
  Tensor w = make_param(14);
  SGD sgd({w}, {.lr = 1e-3});
  GradScaler scaler({.init_scale = 8.0});
  scaler.set_growth_interval(1);
  scaler.set_growth_factor(4.0);
  scaler.set_backoff_factor(0.25);
  EXPECT_KILN_ERROR(scaler.set_growth_factor(0.5), "growth_factor", "> 1");
  EXPECT_KILN_ERROR(scaler.set_backoff_factor(1.5), "backoff_factor", "(0, 1)");
  EXPECT_KILN_ERROR(scaler.set_growth_interval(0), "growth_interval", "[1, 2^31 - 1]");
  // The device's growth tracker is an int32: a longer interval would overflow it first.
  EXPECT_KILN_ERROR(scaler.set_growth_interval(int64_t{1} << 31), "growth_interval", "2147483648");
  EXPECT_EQ(scaler.options().growth_factor, 4.0) << "a rejected value changes nothing";
  EXPECT_EQ(scaler.options().backoff_factor, 0.25);
  EXPECT_EQ(scaler.options().growth_interval, 1);
  Problem problem;
  scaler.scale(problem.loss(w)).backward();
  scaler.step(sgd);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32.0);  // one clean step, interval 1: 8 * 4
  sgd.zero_grad();
  scaler.scale(problem.loss(w)).backward();
  w.grad().view({-1}).narrow(0, 0, 1).fill_(std::numeric_limits<float>::infinity());
  scaler.step(sgd);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 8.0);  // backoff: 32 * 0.25
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
