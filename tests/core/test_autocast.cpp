// Autocast (core/autocast.h): which dtype each op runs in under a region (compared with
// the same op on inputs cast by hand outside any region), what is never touched (float64,
// integers, unlisted ops), nesting, disabling and thread-locality, the cast cache, the
// dtypes backward runs in, gradients against a float32 run, and a small bfloat16 MLP
// that trains as well as its float32 twin.
#include <gtest/gtest.h>

#include <thread>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::random_nonzero;
using testing::random_uniform;

constexpr DType kLowDtypes[] = {DType::Float16, DType::BFloat16};

Tensor f32(const std::vector<int64_t>& sizes, uint64_t seed) { return random_nonzero(sizes, DType::Float32, seed); }

Tensor param(const std::vector<int64_t>& sizes, uint64_t seed) { return f32(sizes, seed).requires_grad_(true); }

// ---- policies ---------------------------------------------------------------------------

TEST(Autocast, LowerPrecisionOpsRunInTheAutocastDtype) {
  const Tensor x = f32({4, 3}, 1), w = f32({5, 3}, 2), b = f32({5}, 3);
  const Tensor a3 = f32({2, 4, 3}, 4), b3 = f32({2, 3, 5}, 5);
  const Tensor img = f32({2, 3, 6, 6}, 6), kernel = f32({4, 3, 3, 3}, 7), kbias = f32({4}, 8);
  const Tensor seq = f32({2, 3, 7}, 9), k1 = f32({4, 3, 3}, 10);
  const Tensor vol = f32({1, 2, 4, 4, 4}, 11), k3 = f32({3, 2, 2, 2, 2}, 12);
  for (DType low : kLowDtypes) {
    SCOPED_TRACE(dtype_name(low));
    Tensor lin, mm, bm, c1, c2, c3, es;
    {
      AutocastGuard autocast(low);
      lin = linear(x, w, b);
      mm = matmul(x, w.t());
      bm = bmm(a3, b3);
      c1 = conv1d(seq, k1);
      c2 = conv2d(img, kernel, kbias, {1}, {1});
      c3 = conv3d(vol, k3);
      es = einsum("bij,bjk->bik", {a3, b3});
    }
    // Autocast must equal casting the inputs by hand, bit for bit.
    EXPECT_TRUE(all_equal(lin, linear(x.to(low), w.to(low), b.to(low))));
    EXPECT_TRUE(all_equal(mm, matmul(x.to(low), w.t().to(low))));
    EXPECT_TRUE(all_equal(bm, bmm(a3.to(low), b3.to(low))));
    EXPECT_TRUE(all_equal(c1, conv1d(seq.to(low), k1.to(low))));
    EXPECT_TRUE(all_equal(c2, conv2d(img.to(low), kernel.to(low), kbias.to(low), {1}, {1})));
    EXPECT_TRUE(all_equal(c3, conv3d(vol.to(low), k3.to(low))));
    EXPECT_TRUE(all_equal(es, bmm(a3.to(low), b3.to(low))));
  }
}

TEST(Autocast, LowerPrecisionOpsAcceptMixedInputs) {
  // A float16 activation meeting a float32 weight is the common case inside a model.
  const Tensor x = f32({4, 3}, 1).to(DType::Float16), w = f32({5, 3}, 2);
  AutocastGuard autocast(DType::BFloat16);
  const Tensor y = linear(x, w);
  EXPECT_EQ(y.dtype(), DType::BFloat16);
  EXPECT_TRUE(all_equal(y, linear(x.to(DType::BFloat16), w.to(DType::BFloat16))));
}

TEST(Autocast, Float32OpsCastLowerInputsUp) {
  for (DType low : kLowDtypes) {
    SCOPED_TRACE(dtype_name(low));
    const Tensor x = random_nonzero({4, 3}, low, 1), pos = abs(x);
    const Tensor x32 = x.to(DType::Float32), pos32 = pos.to(DType::Float32);
    AutocastGuard autocast(low);
    const std::vector<std::pair<Tensor, Tensor>> cases = {
        {softmax(x, 1), softmax(x32, 1)},
        {log_softmax(x, 1), log_softmax(x32, 1)},
        {sum(x), sum(x32)},
        {mean(x, {0}), mean(x32, {0})},
        {var(x, {1}), var(x32, {1})},
        {kiln::std(x), kiln::std(x32)},
        {std::get<0>(var_mean(x, {0})), std::get<0>(var_mean(x32, {0}))},
        {std::get<1>(var_mean(x, {0})), std::get<1>(var_mean(x32, {0}))},
        {norm(x, 3.0), norm(x32, 3.0)},
        {logsumexp(x, {1}), logsumexp(x32, {1})},
        {exp(x), exp(x32)},
        {log(pos), log(pos32)},
        {pow(pos, 1.5), pow(pos32, 1.5)},
        {pow(pos, x), pow(pos32, x32)},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_TRUE(all_equal(cases[i].first, cases[i].second));
    }
  }
}

TEST(Autocast, LossesComputeInFloat32) {
  for (DType low : kLowDtypes) {
    SCOPED_TRACE(dtype_name(low));
    const Tensor logits = random_nonzero({4, 3}, low, 1), target = tensor<int64_t>({0, 2, 1, 2}, {4});
    const Tensor probs = softmax(random_nonzero({4, 3}, DType::Float32, 2), 1).to(low);
    const Tensor weight = random_uniform({3}, 0.5, 1.5, low, 3);
    const Tensor y = random_nonzero({4, 3}, low, 4), labels = random_uniform({4, 3}, 0.0, 1.0, low, 5);
    auto up = [](const Tensor& t) { return t.to(DType::Float32); };
    const Tensor log_probs = log_softmax(up(logits), 1).to(low);
    AutocastGuard autocast(low);
    const std::vector<std::pair<Tensor, Tensor>> cases = {
        {cross_entropy(logits, target, {.weight = weight}), cross_entropy(up(logits), target, {.weight = up(weight)})},
        {cross_entropy(logits, probs), cross_entropy(up(logits), up(probs))},
        {nll_loss(log_probs, target, {.weight = weight}), nll_loss(up(log_probs), target, {.weight = up(weight)})},
        {binary_cross_entropy_with_logits(logits, labels, {.weight = weight, .pos_weight = weight}),
         binary_cross_entropy_with_logits(up(logits), up(labels), {.weight = up(weight), .pos_weight = up(weight)})},
        {mse_loss(logits, y), mse_loss(up(logits), up(y))},
        {l1_loss(logits, y), l1_loss(up(logits), up(y))},
        {smooth_l1_loss(logits, y, Reduction::Sum, 0.5), smooth_l1_loss(up(logits), up(y), Reduction::Sum, 0.5)},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(cases[i].first.dtype(), DType::Float32);
      EXPECT_TRUE(all_equal(cases[i].first, cases[i].second));
    }
  }
}

TEST(Autocast, OtherOpsFollowTypePromotion) {
  const Tensor h = random_nonzero({4, 3}, DType::Float16, 1), w = f32({4, 3}, 2);
  AutocastGuard autocast(DType::Float16);
  EXPECT_EQ(add(h, h).dtype(), DType::Float16);
  EXPECT_EQ(relu(h).dtype(), DType::Float16);
  EXPECT_EQ(amax(h, {1}).dtype(), DType::Float16);       // max/min are exact: not cast
  EXPECT_EQ(argmax(h, 1).dtype(), DType::Int64);
  EXPECT_EQ(add(h, w).dtype(), DType::Float32);           // promotion, not autocast
  EXPECT_EQ(sigmoid(w).dtype(), DType::Float32);
}

TEST(Autocast, LeavesFloat64AndIntegersAlone) {
  const Tensor d = random_nonzero({3, 3}, DType::Float64, 1);
  const Tensor i = tensor<int64_t>({1, 2, 3, 4}, {2, 2});
  const Tensor i32 = tensor<int32_t>({1, 2, 3, 4}, {2, 2});
  AutocastGuard autocast(DType::Float16);
  EXPECT_EQ(matmul(d, d).dtype(), DType::Float64);
  EXPECT_EQ(linear(d, d).dtype(), DType::Float64);
  EXPECT_EQ(sum(d).dtype(), DType::Float64);
  EXPECT_EQ(softmax(d, 0).dtype(), DType::Float64);
  EXPECT_TRUE(all_equal(matmul(i, i), tensor<int64_t>({7, 10, 15, 22}, {2, 2})));
  EXPECT_EQ(sum(i32).dtype(), DType::Int64);
  EXPECT_EQ(sum(i32).item<int64_t>(), 10);
  EXPECT_EQ(autocast_input(i32, AutocastPolicy::LowerPrecision).dtype(), DType::Int32);
  EXPECT_EQ(autocast_input(i32, AutocastPolicy::Float32).dtype(), DType::Int32);
  EXPECT_FALSE(autocast_input(Tensor(), AutocastPolicy::Float32).defined());
}

// ---- state ------------------------------------------------------------------------------

TEST(Autocast, OffByDefaultAndRegionsNest) {
  const Tensor x = f32({2, 2}, 1);
  EXPECT_FALSE(autocast_enabled());
  EXPECT_EQ(matmul(x, x).dtype(), DType::Float32);
  {
    AutocastGuard outer(DType::Float16);
    EXPECT_TRUE(autocast_enabled());
    EXPECT_EQ(autocast_state().dtype, DType::Float16);
    {
      AutocastGuard inner(DType::BFloat16);
      EXPECT_EQ(matmul(x, x).dtype(), DType::BFloat16);
      {
        AutocastGuard off(DType::Float16, /*enabled=*/false);
        EXPECT_FALSE(autocast_enabled());
        EXPECT_EQ(matmul(x, x).dtype(), DType::Float32);
      }
      EXPECT_EQ(autocast_state().dtype, DType::BFloat16);
      EXPECT_TRUE(autocast_enabled());
    }
    EXPECT_EQ(autocast_state().dtype, DType::Float16);
    EXPECT_EQ(matmul(x, x).dtype(), DType::Float16);
  }
  EXPECT_FALSE(autocast_enabled());
  EXPECT_EQ(matmul(x, x).dtype(), DType::Float32);
}

TEST(Autocast, RejectsDtypesOtherThanHalfTypes) {
  // Named guards: `AutocastGuard(DType::Float32);` alone is a declaration to Clang.
  EXPECT_KILN_ERROR(const AutocastGuard guard(DType::Float32), "autocast", "float16 or bfloat16", "float32");
  EXPECT_KILN_ERROR(const AutocastGuard guard(DType::Int64, false), "autocast", "int64");
  EXPECT_FALSE(autocast_enabled());
}

TEST(Autocast, IsThreadLocal) {
  const Tensor x = f32({2, 2}, 1);
  AutocastGuard autocast(DType::Float16);
  bool other_enabled = true;
  DType other_dtype = DType::Float16;
  std::thread other([&] {
    other_enabled = autocast_enabled();
    other_dtype = matmul(x, x).dtype();
  });
  other.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_EQ(other_dtype, DType::Float32);
  EXPECT_EQ(matmul(x, x).dtype(), DType::Float16);
}

// ---- the cast cache (Note [Autocast cast cache]) -----------------------------------------

TEST(AutocastCache, CastsAParameterOncePerRegion) {
  const Tensor w = param({5, 3}, 1), b = param({5}, 2), x = f32({4, 3}, 3);
  EXPECT_EQ(autocast_cache_size(), 0u);
  {
    AutocastGuard autocast(DType::Float16);
    linear(x, w, b);
    EXPECT_EQ(autocast_cache_size(), 2u);  // w and b; x is not a parameter
    linear(x, w, b);
    linear(relu(linear(x, w, b)), param({3, 5}, 4));
    EXPECT_EQ(autocast_cache_size(), 3u);
    const Tensor first = autocast_input(w, AutocastPolicy::LowerPrecision);
    EXPECT_TRUE(first.is_same(autocast_input(w, AutocastPolicy::LowerPrecision)));
    EXPECT_FALSE(autocast_input(x, AutocastPolicy::LowerPrecision)
                     .is_same(autocast_input(x, AutocastPolicy::LowerPrecision)));
    {
      AutocastGuard inner(DType::BFloat16);  // another dtype is another entry
      linear(x, w);
      EXPECT_EQ(autocast_cache_size(), 4u);
    }
    EXPECT_EQ(autocast_cache_size(), 4u);  // only the outermost region's exit clears
  }
  EXPECT_EQ(autocast_cache_size(), 0u);
}

TEST(AutocastCache, RecastsAParameterModifiedInPlace) {
  Tensor w = param({5, 3}, 1);
  AutocastGuard autocast(DType::Float16);
  const Tensor before = autocast_input(w, AutocastPolicy::LowerPrecision);
  {
    NoGradGuard no_grad;
    w.mul_(2.0);  // as an optimizer step would
  }
  const Tensor after = autocast_input(w, AutocastPolicy::LowerPrecision);
  EXPECT_FALSE(after.is_same(before));
  EXPECT_TRUE(all_equal(after, w.detach().to(DType::Float16)));
  EXPECT_EQ(autocast_cache_size(), 1u);
}

// set_data gives the parameter another storage, whose version may equal the one the cast
// was made at: the cache must still see new data (Note [Set data]).
TEST(AutocastCache, RecastsAParameterGivenOtherData) {
  Tensor w = param({5, 3}, 1);
  AutocastGuard autocast(DType::Float16);
  const Tensor before = autocast_input(w, AutocastPolicy::LowerPrecision);
  Tensor other = full({5, 3}, 0.25);
  ASSERT_EQ(other.version(), w.version());
  w.set_data(other);
  const Tensor after = autocast_input(w, AutocastPolicy::LowerPrecision);
  EXPECT_FALSE(after.is_same(before));
  EXPECT_TRUE(all_equal(after, full({5, 3}, 0.25, {.dtype = DType::Float16})));
}

TEST(AutocastCache, RecastsAfterBackwardFreedTheCastAndAfterNoGrad) {
  const Tensor w = param({3, 3}, 1), x = f32({2, 3}, 2);
  AutocastGuard autocast(DType::Float16);
  Tensor no_graph;
  {
    NoGradGuard no_grad;
    no_graph = autocast_input(w, AutocastPolicy::LowerPrecision);
  }
  EXPECT_EQ(no_graph.grad_fn(), nullptr);
  // Gradient accumulation: two forward/backward passes in one region.
  sum(linear(x, w)).backward();
  const Tensor once = w.grad().clone();
  sum(linear(x, w)).backward();
  EXPECT_TRUE(all_close(w.grad(), mul(once, 2.0)));
  EXPECT_EQ(autocast_cache_size(), 1u);
}

// ---- backward ---------------------------------------------------------------------------

TEST(AutocastBackward, GradientsReachFloat32ParametersAsFloat32) {
  const Tensor x = f32({6, 4}, 1);
  const Tensor w1 = param({8, 4}, 2), b1 = param({8}, 3), w2 = param({2, 8}, 4);
  const Tensor target = tensor<int64_t>({0, 1, 1, 0, 1, 0}, {6});
  auto loss_of = [&] { return cross_entropy(linear(relu(linear(x, w1, b1)), w2), target); };
  loss_of().backward();
  const std::vector<Tensor> reference = {w1.grad(), b1.grad(), w2.grad()};
  for (const Tensor& p : {w1, b1, w2}) p.set_grad(Tensor());
  {
    AutocastGuard autocast(DType::Float16);
    const Tensor loss = loss_of();
    EXPECT_EQ(loss.dtype(), DType::Float32);
    loss.backward();
  }
  const std::vector<Tensor> got = {w1.grad(), b1.grad(), w2.grad()};
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].dtype(), DType::Float32);
    EXPECT_TRUE(all_close(got[i], reference[i], {2e-3, 1e-2}));
  }
}

TEST(AutocastBackward, RunsEachOpInItsForwardDtypeEvenInsideARegion) {
  // amax's backward splits the gradient among ties, counted with a sum over the float16
  // mask. Were autocast on during backward, that sum would be float32 and so would the
  // gradient amax hands back. A tensor hook sees the gradient as the backward produced it.
  const Tensor x = f32({4, 3}, 1), w = param({5, 3}, 2);
  AutocastGuard autocast(DType::Float16);
  const Tensor h = linear(x, w);
  const Tensor m = amax(h, {1});
  DType h_grad = DType::Float64, m_grad = DType::Float64;
  h.register_hook([&](const Tensor& g) { h_grad = g.dtype(); return Tensor(); });
  m.register_hook([&](const Tensor& g) { m_grad = g.dtype(); return Tensor(); });
  sum(m).backward();
  EXPECT_EQ(m_grad, DType::Float16);  // sum's float32 gradient cast back by the autocast cast
  EXPECT_EQ(h_grad, DType::Float16);
  EXPECT_TRUE(autocast_enabled());  // the engine gave the state back
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
}

TEST(AutocastBackward, CheckpointRecomputesUnderTheForwardsAutocast) {
  const Tensor x = f32({4, 3}, 1), w = param({5, 3}, 2);
  auto block = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(mul(linear(in[0], w), 0.1))}; };
  Tensor loss;
  {
    AutocastGuard autocast(DType::Float16);
    loss = sum(block({x})[0]);
  }
  loss.backward();
  const Tensor plain = w.grad().clone();
  w.set_grad(Tensor());
  {
    AutocastGuard autocast(DType::Float16);
    loss = sum(checkpoint(block, {x})[0]);
  }
  loss.backward();  // outside the region: the recompute must switch float16 back on
  EXPECT_TRUE(all_equal(w.grad(), plain));
}

// ---- training ---------------------------------------------------------------------------

// A two-layer MLP regressing a fixed random teacher, trained by plain SGD on float32
// parameters; `low` = nullopt trains without autocast. Returns the final loss.
double train_mlp(std::optional<DType> low, int steps) {
  const Tensor x = f32({64, 8}, 1);
  const Tensor y = tanh(matmul(x, f32({8, 1}, 2)));
  const Tensor w1 = mul(f32({16, 8}, 3), 0.3).detach().requires_grad_(true);
  const Tensor b1 = zeros({16}).requires_grad_(true);
  const Tensor w2 = mul(f32({1, 16}, 4), 0.3).detach().requires_grad_(true);
  const Tensor b2 = zeros({1}).requires_grad_(true);
  std::optional<AutocastGuard> autocast;  // one region for every step: the cache must follow the updates
  if (low) autocast.emplace(*low);
  double loss_value = 0;
  for (int step = 0; step < steps; ++step) {
    const Tensor loss = mse_loss(linear(relu(linear(x, w1, b1)), w2, b2), y);
    EXPECT_EQ(loss.dtype(), DType::Float32);
    loss_value = loss.item<double>();
    loss.backward();
    NoGradGuard no_grad;
    for (const Tensor& p : {w1, b1, w2, b2}) {
      Tensor(p).sub_(mul(p.grad(), 0.2));
      p.set_grad(Tensor());
    }
  }
  return loss_value;
}

TEST(AutocastTraining, Bfloat16MlpReachesTheFloat32Loss) {
  const double initial = train_mlp(std::nullopt, 1);
  const double full = train_mlp(std::nullopt, 60);
  const double mixed = train_mlp(DType::BFloat16, 60);
  EXPECT_LT(full, 0.3 * initial);
  EXPECT_NEAR(mixed, full, 0.1 * full + 1e-3);
}

}  // namespace
}  // namespace kiln
