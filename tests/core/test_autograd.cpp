// The autograd engine and its rules: dependency counting, accumulation with grad = None
// semantics, retain_graph, grad-mode guards, hooks, version counters, anomaly mode,
// autograd::grad and activation checkpointing. The in-place rules under autograd are
// tested in test_inplace.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/autograd/node.h"
#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;

Tensor leaf(std::vector<double> values) { return tensor(values).requires_grad_(true); }

TEST(Autograd, ChainRuleThroughADiamondRunsEachNodeOnce) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, 2.0);
  int y_hook_calls = 0;
  y.register_hook([&](const Tensor&) {
    ++y_hook_calls;
    return Tensor();
  });
  Tensor z = add(mul(y, y), exp(y));  // y feeds two branches
  z.sum().backward();
  EXPECT_EQ(y_hook_calls, 1);  // the gradients of both branches were summed first
  const std::vector<double> xv = {1, 2, 3};
  std::vector<double> expected;
  for (double v : xv) expected.push_back(2 * (2 * (2 * v)) + 2 * std::exp(2 * v));
  EXPECT_TRUE(all_close(x.grad(), tensor(expected)));
}

TEST(Autograd, LeafGradientsAccumulateFromNone) {
  Tensor w = leaf({1, 2});
  EXPECT_FALSE(w.grad().defined());  // None before any backward
  mul(w, 3.0).sum().backward();
  EXPECT_TRUE(all_equal(w.grad(), tensor<double>({3, 3})));
  mul(w, w).sum().backward();
  EXPECT_TRUE(all_equal(w.grad(), tensor<double>({5, 7})));  // accumulated
  w.set_grad(Tensor());                                      // zero_grad(set_to_none)
  mul(w, 2.0).sum().backward();
  EXPECT_TRUE(all_equal(w.grad(), tensor<double>({2, 2})));  // fresh, not added to zeros
}

TEST(Autograd, GradientIsNotAnAliasOfTheSeed) {
  Tensor w = leaf({1, 2});
  Tensor seed = tensor<double>({1, 1});
  add(w, 0.0).backward(seed);
  seed.fill_(9);
  EXPECT_TRUE(all_equal(w.grad(), tensor<double>({1, 1})));
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({4, 8})));
  EXPECT_KILN_ERROR(y.backward(), "second time", "retain_graph");
}

TEST(Autograd, BackwardErrors) {
  EXPECT_KILN_ERROR(tensor<double>({1}).backward(), "does not require grad");
  Tensor x = leaf({1, 2});
  EXPECT_KILN_ERROR(mul(x, 2.0).backward(), "one element", "[2]");
  EXPECT_KILN_ERROR(mul(x, 2.0).backward(tensor<double>({1, 2, 3})), "gradient of shape [3]");
  EXPECT_KILN_ERROR(tensor<int64_t>({1}).requires_grad_(), "floating-point");
}

TEST(Autograd, NoGradAndEnableGradGuards) {
  Tensor x = leaf({1});
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(mul(x, 2.0).requires_grad());
    {
      EnableGradGuard enable;
      EXPECT_TRUE(mul(x, 2.0).requires_grad());
    }
    EXPECT_FALSE(mul(x, 2.0).requires_grad());
  }
  EXPECT_TRUE(mul(x, 2.0).requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(mul(x, 2.0).is_leaf());
  const Tensor d = mul(x, 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
}

TEST(Autograd, TensorHooksCanReplaceTheGradient) {
  Tensor x = leaf({1, 2});
  x.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  Tensor y = mul(x, 2.0);
  const int handle = y.register_hook([](const Tensor& g) { return add(g, 1.0); });
  y.sum().backward(Tensor(), true);
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({40, 40})));  // ((1 + 1) * 2) * 10
  y.remove_hook(handle);
  x.set_grad(Tensor());
  y.sum().backward();
  EXPECT_TRUE(all_equal(x.grad(), tensor<double>({20, 20})));
}

TEST(Autograd, PostAccumulateGradHookSeesTheAccumulatedGradient) {
  Tensor w = leaf({1, 2});
  std::vector<double> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& t) { seen = t.grad().to_vector<double>(); });
  mul(w, 3.0).sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{3, 3}));
  EXPECT_KILN_ERROR(mul(w, 1.0).register_post_accumulate_grad_hook([](const Tensor&) {}), "leaf");
}

TEST(Autograd, RetainGradKeepsANonLeafGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 3.0);
  y.retain_grad();
  mul(y, y).sum().backward();
  EXPECT_TRUE(all_equal(y.grad(), tensor<double>({6, 12})));
}

TEST(Autograd, ModifyingASavedTensorInPlaceIsAnErrorNamingTheOp) {
  Tensor x = leaf({1, 2});
  Tensor y = exp(x);  // exp saves its output
  Tensor z = mul(y, 2.0);
  y.mul_(2.0);  // y is a non-leaf: allowed, but exp's saved output is now stale
  EXPECT_KILN_ERROR(z.sum().backward(), "'exp'", "modified by an in-place operation", "version");
}

TEST(Autograd, GradFunctionDoesNotTouchLeafGrads) {
  Tensor x = leaf({1, 2});
  Tensor w = leaf({3, 4});
  Tensor y = mul(mul(x, w), x).sum();
  const std::vector<Tensor> g = autograd::grad({y}, {x, w});
  EXPECT_TRUE(all_equal(g[0], tensor<double>({6, 16})));
  EXPECT_TRUE(all_equal(g[1], tensor<double>({1, 4})));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  Tensor unused = leaf({1});
  EXPECT_KILN_ERROR(autograd::grad({mul(x, 2.0).sum()}, {unused}), "not used", "allow_unused");
  EXPECT_FALSE(autograd::grad({mul(x, 2.0).sum()}, {unused}, {}, false, true)[0].defined());
}

TEST(Autograd, AnomalyModeNamesTheForwardOp) {
  Tensor x = leaf({0.0, 1.0});
  Tensor y = sqrt(x).sum();  // d sqrt(x)/dx = inf at 0
  {
    DetectAnomalyGuard anomaly;
    EXPECT_KILN_ERROR(y.backward(), "anomaly", "'sqrt'", "NaN or Inf");
  }
  Tensor z = sqrt(x).sum();
  z.backward();  // without anomaly mode the inf just propagates
  EXPECT_TRUE(std::isinf(x.grad().to_vector<double>()[0]));
}

TEST(Autograd, GradientsArriveInTheInputDtype) {
  Tensor a = tensor<float>({1, 2}).requires_grad_(true);
  Tensor b = tensor<double>({3, 4}).requires_grad_(true);
  mul(a, b).sum().backward();  // computed in float64
  EXPECT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_EQ(b.grad().dtype(), DType::Float64);
  EXPECT_TRUE(all_close(a.grad(), tensor<float>({3, 4})));
}

// A block whose activations are recomputed in backward gives the same gradients as the
// plain block, also with dropout inside (the generator is rewound for the recompute).
TEST(Autograd, CheckpointMatchesThePlainGraph) {
  const Tensor w_values = testing::random_nonzero({4, 4}, DType::Float64, 3);
  auto block = [](const Tensor& x, const Tensor& w) {
    return dropout(tanh(add(mul(x, w), 0.1)), 0.3, true);
  };
  Tensor x1 = testing::random_nonzero({4, 4}, DType::Float64, 4).requires_grad_(true);
  Tensor w1 = w_values.clone().requires_grad_(true);
  manual_seed(11);
  const Tensor plain = block(x1, w1);
  mul(plain, plain).sum().backward();

  Tensor x2 = x1.detach().clone().requires_grad_(true);
  Tensor w2 = w_values.clone().requires_grad_(true);
  manual_seed(11);
  const std::vector<Tensor> out = checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{block(in[0], w2)}; },
                                             {x2});
  EXPECT_TRUE(all_equal(out[0].detach(), plain.detach()));
  EXPECT_FALSE(out[0].grad_fn() == nullptr);
  mul(out[0], out[0]).sum().backward();
  EXPECT_TRUE(all_close(x2.grad(), x1.grad()));
  EXPECT_TRUE(all_close(w2.grad(), w1.grad()));  // parameters captured by the function
}

KILN_GRADCHECK_TEST(checkpoint) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& v) {
        return checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(exp(in[0]), in[1])}; },
                          v)[0];
      },
      {testing::random_nonzero({3}, DType::Float64, 1).requires_grad_(true),
       testing::random_nonzero({3}, DType::Float64, 2).requires_grad_(true)}));
}

}  // namespace
}  // namespace kiln
