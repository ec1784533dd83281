// Multi-tensor ops (core/ops/multi_tensor.h) on the CPU backend against references.
//
// The references are PyTorch's single-tensor formulas (torch/optim/sgd.py, adam.py,
// rmsprop.py, torch.amp's _amp_update_scale_) written again as plain float64 loops over
// the values the kernel read. Each step is checked on its own (the reference starts from
// the tensors' current values), so a float16 state's rounding does not accumulate into
// the comparison; the tolerance is the output dtype's (tests/test_util.h).
// Lists mix sizes: tiny, one spanning several chunks of the CPU work list (so the
// parallel path runs), an empty tensor (dropped by the op layer) and a scalar-like one.
#include <cmath>
#include <limits>
#include <vector>

#include "core/ops/multi_tensor.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::random_uniform;
using List = std::vector<Tensor>;
using Values = std::vector<std::vector<double>>;  // one vector per tensor

const std::vector<std::vector<int64_t>> kShapes = {{3, 4}, {70001}, {0}, {2, 1, 5}, {1}};
const DType kDTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};

List make_list(DType dtype, double low, double high, uint64_t seed) {
  List list;
  for (const auto& shape : kShapes) list.push_back(random_uniform(shape, low, high, dtype, seed++));
  return list;
}

Values values_of(const List& list) {
  Values out;
  for (const Tensor& t : list) out.push_back(t.to_vector<double>());
  return out;
}

List clones(const List& list) {
  List out;
  for (const Tensor& t : list) out.push_back(t.clone());
  return out;
}

void expect_close(const List& actual, const Values& expected, const char* what) {
  for (size_t i = 0; i < actual.size(); ++i) {
    const Tensor want = tensor(expected[i], actual[i].sizes(), {.dtype = DType::Float64});
    EXPECT_TRUE(all_close(actual[i], want)) << what << "[" << i << "] " << actual[i].dtype();
  }
}

void expect_identical(const List& actual, const List& before, const char* what) {
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_TRUE(all_equal(actual[i], before[i])) << what << "[" << i << "]";
}

Tensor scalar1(float value) { return full({1}, value, {.dtype = DType::Float32}); }

List step_counters(size_t n, float first) {
  List steps;
  for (size_t i = 0; i < n; ++i) steps.push_back(scalar_tensor(first + static_cast<float>(i), {.dtype = DType::Float32}));
  return steps;
}

// ---- SGD ----------------------------------------------------------------------------------

struct SgdRef {
  Values p, buf;
};

SgdRef sgd_reference(const Values& p0, const Values& g0, const Values& buf0, const SgdStepParams& o,
                     double inv_scale) {
  SgdRef r{p0, buf0};
  for (size_t i = 0; i < p0.size(); ++i) {
    for (size_t j = 0; j < p0[i].size(); ++j) {
      double g = g0[i][j] * inv_scale;
      if (o.maximize) g = -g;
      g += o.weight_decay * p0[i][j];
      if (o.momentum != 0) {
        const double b = o.first_step ? g : o.momentum * buf0[i][j] + (1 - o.dampening) * g;
        r.buf[i][j] = b;
        g = o.nesterov ? g + o.momentum * b : b;
      }
      r.p[i][j] = p0[i][j] - o.lr * g;
    }
  }
  return r;
}

void check_sgd(const SgdStepParams& options, double inv_scale) {
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(::testing::Message() << dtype << " momentum " << options.momentum);
    List params = make_list(dtype, -1, 1, 10), grads = make_list(dtype, -1, 1, 20);
    List bufs = options.momentum != 0 ? make_list(dtype, -1, 1, 30) : List{};
    for (int step = 0; step < 3; ++step) {
      SgdStepParams o = options;
      o.first_step = options.first_step && step == 0;
      const SgdRef want = sgd_reference(values_of(params), values_of(grads), values_of(bufs), o, inv_scale);
      AmpStepArgs amp;
      if (inv_scale != 1) amp.inv_scale = scalar1(static_cast<float>(inv_scale));
      sgd_step_(params, grads, bufs, o, amp);
      expect_close(params, want.p, "params");
      expect_close(bufs, want.buf, "momentum_buffers");
    }
  }
}

TEST(MultiTensor, SgdPlain) { check_sgd({.lr = 0.1}, 1); }
TEST(MultiTensor, SgdMomentumDampeningWeightDecay) {
  check_sgd({.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .first_step = true}, 1);
}
TEST(MultiTensor, SgdNesterovMaximizeUnscaled) {
  check_sgd({.lr = 0.05, .momentum = 0.8, .weight_decay = 0.02, .nesterov = true, .maximize = true}, 0.25);
}

// ---- Adam / AdamW -------------------------------------------------------------------------

struct AdamRef {
  Values p, m, v, v_max;
};

AdamRef adam_reference(const List& params, const List& grads, const List& m, const List& v, const List& v_max,
                       const List& steps, const AdamStepParams& o, double inv_scale) {
  AdamRef r{values_of(params), values_of(m), values_of(v), values_of(v_max)};
  const Values g = values_of(grads);
  for (size_t i = 0; i < params.size(); ++i) {
    const double step = steps[i].item<double>();
    const double bc1 = 1 - std::pow(o.beta1, step), bc2 = 1 - std::pow(o.beta2, step);
    for (size_t j = 0; j < r.p[i].size(); ++j) {
      double grad = g[i][j] * inv_scale, p = r.p[i][j];
      if (o.maximize) grad = -grad;
      if (o.decoupled_weight_decay) p *= 1 - o.lr * o.weight_decay;
      else grad += o.weight_decay * p;
      r.m[i][j] = o.beta1 * r.m[i][j] + (1 - o.beta1) * grad;
      r.v[i][j] = o.beta2 * r.v[i][j] + (1 - o.beta2) * grad * grad;
      double second = r.v[i][j];
      if (o.amsgrad) second = r.v_max[i][j] = std::max(r.v_max[i][j], r.v[i][j]);
      r.p[i][j] = p - (o.lr / bc1) * r.m[i][j] / (std::sqrt(second) / std::sqrt(bc2) + o.eps);
    }
  }
  return r;
}

void check_adam(const AdamStepParams& o, double inv_scale) {
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(::testing::Message() << dtype);
    List params = make_list(dtype, -1, 1, 10), grads = make_list(dtype, -1, 1, 20);
    List m = make_list(dtype, -0.1, 0.1, 30), v = make_list(dtype, 0, 0.01, 40);
    List v_max = o.amsgrad ? make_list(dtype, 0, 0.02, 50) : List{};
    List steps = step_counters(params.size(), 0);  // tensor i at step i + 1 after the first increment
    for (int step = 0; step < 3; ++step) {
      increment_steps_(steps);
      const AdamRef want = adam_reference(params, grads, m, v, v_max, steps, o, inv_scale);
      AmpStepArgs amp;
      if (inv_scale != 1) amp.inv_scale = scalar1(static_cast<float>(inv_scale));
      adam_step_(params, grads, m, v, v_max, steps, o, amp);
      expect_close(params, want.p, "params");
      expect_close(m, want.m, "exp_avgs");
      expect_close(v, want.v, "exp_avg_sqs");
      expect_close(v_max, want.v_max, "max_exp_avg_sqs");
    }
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].item<double>(), 3.0 + static_cast<double>(i));
  }
}

TEST(MultiTensor, AdamPlain) { check_adam({.lr = 1e-2}, 1); }
TEST(MultiTensor, AdamWeightDecayMaximize) { check_adam({.lr = 1e-2, .weight_decay = 0.1, .maximize = true}, 1); }
TEST(MultiTensor, AdamWDecoupled) {
  check_adam({.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1,
              .decoupled_weight_decay = true}, 1);
}
TEST(MultiTensor, AdamAmsgradUnscaled) { check_adam({.lr = 1e-2, .amsgrad = true}, 0.125); }

// ---- RMSprop ------------------------------------------------------------------------------

struct RmspropRef {
  Values p, sq, buf, ga;
};

RmspropRef rmsprop_reference(const List& params, const List& grads, const List& sq, const List& bufs,
                             const List& ga, const RmspropStepParams& o, double inv_scale) {
  RmspropRef r{values_of(params), values_of(sq), values_of(bufs), values_of(ga)};
  const Values g = values_of(grads);
  for (size_t i = 0; i < params.size(); ++i) {
    for (size_t j = 0; j < r.p[i].size(); ++j) {
      double grad = g[i][j] * inv_scale;
      if (o.maximize) grad = -grad;
      grad += o.weight_decay * r.p[i][j];
      r.sq[i][j] = o.alpha * r.sq[i][j] + (1 - o.alpha) * grad * grad;
      double avg;
      if (o.centered) {
        r.ga[i][j] = o.alpha * r.ga[i][j] + (1 - o.alpha) * grad;
        avg = std::sqrt(r.sq[i][j] - r.ga[i][j] * r.ga[i][j]) + o.eps;
      } else {
        avg = std::sqrt(r.sq[i][j]) + o.eps;
      }
      if (o.momentum > 0) {
        r.buf[i][j] = o.momentum * r.buf[i][j] + grad / avg;
        r.p[i][j] -= o.lr * r.buf[i][j];
      } else {
        r.p[i][j] -= o.lr * grad / avg;
      }
    }
  }
  return r;
}

void check_rmsprop(const RmspropStepParams& o, double inv_scale) {
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(::testing::Message() << dtype);
    List params = make_list(dtype, -1, 1, 10), grads = make_list(dtype, -1, 1, 20);
    List sq = make_list(dtype, 1, 2, 30);
    List bufs = o.momentum > 0 ? make_list(dtype, -0.1, 0.1, 40) : List{};
    List ga = o.centered ? make_list(dtype, -0.5, 0.5, 50) : List{};
    for (int step = 0; step < 3; ++step) {
      const RmspropRef want = rmsprop_reference(params, grads, sq, bufs, ga, o, inv_scale);
      AmpStepArgs amp;
      if (inv_scale != 1) amp.inv_scale = scalar1(static_cast<float>(inv_scale));
      rmsprop_step_(params, grads, sq, bufs, ga, o, amp);
      expect_close(params, want.p, "params");
      expect_close(sq, want.sq, "square_avgs");
      expect_close(bufs, want.buf, "momentum_buffers");
      expect_close(ga, want.ga, "grad_avgs");
    }
  }
}

TEST(MultiTensor, RmspropPlain) { check_rmsprop({.lr = 1e-2}, 1); }
TEST(MultiTensor, RmspropCenteredMomentumWeightDecay) {
  check_rmsprop({.lr = 1e-2, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.05, .momentum = 0.9, .centered = true}, 1);
}
TEST(MultiTensor, RmspropMaximizeUnscaled) { check_rmsprop({.lr = 1e-2, .momentum = 0.5, .maximize = true}, 0.5); }

// ---- skipped steps: found_inf non-zero writes nothing -------------------------------------

TEST(MultiTensor, FoundInfSkipsEveryStepBitIdentically) {
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(::testing::Message() << dtype);
    List params = make_list(dtype, -1, 1, 1), grads = make_list(dtype, -1, 1, 2);
    List s1 = make_list(dtype, 0, 1, 3), s2 = make_list(dtype, 0, 1, 4), s3 = make_list(dtype, 0, 1, 5);
    List steps = step_counters(params.size(), 4);
    // Poison a gradient as an overflowed scaled backward would, and find it.
    grads[1].narrow(0, 70000, 1).fill_(std::numeric_limits<double>::infinity());
    const Tensor found_inf = scalar1(0);
    const Tensor inv_scale = scalar1(0.5f);
    multi_tensor_scale_(grads, {}, Tensor(), found_inf);
    ASSERT_EQ(found_inf.item<double>(), 1.0);
    const AmpStepArgs amp{.inv_scale = inv_scale, .found_inf = found_inf};
    const List p0 = clones(params), a0 = clones(s1), b0 = clones(s2), c0 = clones(s3), st0 = clones(steps);

    increment_steps_(steps, found_inf);
    sgd_step_(params, grads, s1, {.lr = 0.1, .momentum = 0.9}, amp);
    adam_step_(params, grads, s1, s2, s3, steps, {.lr = 0.1, .amsgrad = true}, amp);
    rmsprop_step_(params, grads, s1, s2, s3, {.lr = 0.1, .momentum = 0.9, .centered = true}, amp);
    expect_identical(params, p0, "params");
    expect_identical(s1, a0, "state1");
    expect_identical(s2, b0, "state2");
    expect_identical(s3, c0, "state3");
    expect_identical(steps, st0, "steps");
  }
}

TEST(MultiTensor, IncrementStepsCountsWhenNoInfWasFound) {
  List steps = step_counters(3, 7);
  increment_steps_(steps, scalar1(0));
  increment_steps_(steps);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].item<double>(), 9.0 + static_cast<double>(i));
}

}  // namespace
}  // namespace kiln
