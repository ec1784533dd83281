// Loss functions against plain float64 loops written here from PyTorch's documented
// formulas: nll_loss and cross_entropy with class weights, ignore_index, label smoothing,
// spatial targets, probability targets and every reduction; BCE-with-logits with weight
// and pos_weight; the regression losses; large logits (|x| = 1000) stay finite; bad
// targets give clear errors; and a float64 gradient check per loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_nonzero;
using testing::random_uniform;
using Inputs = std::vector<Tensor>;
using Values = std::vector<double>;

constexpr int64_t kIgnore = -100;

// Applies a reduction to per-element losses: None keeps them, Sum adds, Mean divides
// the sum by `denominator`.
Values reduce(const Values& losses, Reduction reduction, double denominator) {
  if (reduction == Reduction::None) return losses;
  double total = 0;
  for (double l : losses) total += l;
  return {reduction == Reduction::Sum ? total : total / denominator};
}

Tensor as_tensor(const Values& values, Reduction reduction, const std::vector<int64_t>& none_shape) {
  if (reduction == Reduction::None) return tensor(values, none_shape);
  return tensor(values, {}).reshape({});
}

// Index-target cross entropy over x laid out [N, C, S] (S = the spatial positions), as
// PyTorch defines it; with logits = false x already holds log-probabilities (nll_loss).
struct IndexCase {
  int64_t n, c, s;
  Values x{};
  std::vector<int64_t> target{};  // [N, S]
  Values weight{};              // empty = all ones
  int64_t ignore = kIgnore;
  double smoothing = 0;
};

Values reference_index_loss(const IndexCase& k, Reduction reduction, bool logits) {
  Values losses;
  double weight_sum = 0;
  for (int64_t n = 0; n < k.n; ++n) {
    for (int64_t s = 0; s < k.s; ++s) {
      const int64_t t = k.target[n * k.s + s];
      if (t == k.ignore) {
        losses.push_back(0);
        continue;
      }
      Values logp(k.c);
      double lse = 0;
      for (int64_t c = 0; c < k.c; ++c) lse += std::exp(k.x[(n * k.c + c) * k.s + s]);
      for (int64_t c = 0; c < k.c; ++c) logp[c] = k.x[(n * k.c + c) * k.s + s] - (logits ? std::log(lse) : 0);
      auto w = [&](int64_t c) { return k.weight.empty() ? 1.0 : k.weight[c]; };
      double smooth = 0;
      for (int64_t c = 0; c < k.c; ++c) smooth -= w(c) * logp[c];
      const double nll = -w(t) * logp[t];
      losses.push_back((1 - k.smoothing) * nll + k.smoothing / static_cast<double>(k.c) * smooth);
      weight_sum += w(t);
    }
  }
  return reduce(losses, reduction, weight_sum);
}

Tensor input_of(const IndexCase& k) {
  if (k.s == 1) return tensor(k.x, {k.n, k.c});
  return tensor(k.x, {k.n, k.c, k.s});
}
Tensor target_of(const IndexCase& k) {
  if (k.s == 1) return tensor(k.target, {k.n});
  return tensor(k.target, {k.n, k.s});
}
std::vector<int64_t> none_shape(const IndexCase& k) {
  return k.s == 1 ? std::vector<int64_t>{k.n} : std::vector<int64_t>{k.n, k.s};
}

IndexCase make_case(int64_t n, int64_t c, int64_t s, std::vector<int64_t> target, uint64_t seed) {
  IndexCase k{.n = n, .c = c, .s = s, .x = random_uniform({n * c * s}, -3, 3, DType::Float64, seed).to_vector<double>(),
              .target = std::move(target)};
  return k;
}

const Reduction kReductions[] = {Reduction::None, Reduction::Sum, Reduction::Mean};

void expect_nll_matches(const IndexCase& k) {
  for (Reduction r : kReductions) {
    const Tensor weight = k.weight.empty() ? Tensor() : tensor(k.weight);
    const Tensor got = nll_loss(input_of(k), target_of(k), {.weight = weight, .ignore_index = k.ignore, .reduction = r});
    EXPECT_TRUE(all_close(got, as_tensor(reference_index_loss(k, r, false), r, none_shape(k))))
        << "reduction " << static_cast<int>(r);
  }
}

void expect_cross_entropy_matches(const IndexCase& k) {
  for (Reduction r : kReductions) {
    const Tensor weight = k.weight.empty() ? Tensor() : tensor(k.weight);
    const Tensor got = cross_entropy(input_of(k), target_of(k),
                                     {.weight = weight, .ignore_index = k.ignore, .reduction = r,
                                      .label_smoothing = k.smoothing});
    EXPECT_TRUE(all_close(got, as_tensor(reference_index_loss(k, r, true), r, none_shape(k))))
        << "reduction " << static_cast<int>(r) << " smoothing " << k.smoothing;
  }
}

TEST(NllLoss, MatchesReferenceWithWeightsAndIgnoreIndex) {
  IndexCase k = make_case(5, 4, 1, {0, 3, 1, 3, 2}, 1);
  expect_nll_matches(k);
  k.weight = {0.5, 2.0, 1.5, 0.25};
  expect_nll_matches(k);
  k.target = {0, kIgnore, 1, 3, kIgnore};
  expect_nll_matches(k);
  k.ignore = 3;  // a class value can be the ignored one
  k.target = {0, 3, 1, 3, 2};
  expect_nll_matches(k);
}

TEST(NllLoss, SpatialTargets) {
  IndexCase k = make_case(2, 3, 4, {0, 1, 2, 1, kIgnore, 2, 0, 0}, 2);
  k.weight = {1.5, 0.5, 3.0};
  expect_nll_matches(k);
  // [N, C, H, W] with [N, H, W] targets: the same numbers in a 4-d layout.
  const Tensor got = nll_loss(input_of(k).reshape({2, 3, 2, 2}), target_of(k).reshape({2, 2, 2}),
                              {.weight = tensor(k.weight)});
  EXPECT_TRUE(all_close(got, as_tensor(reference_index_loss(k, Reduction::Mean, false), Reduction::Mean, {})));
}

TEST(NllLoss, UnbatchedInput) {
  const Tensor logp = tensor<double>({-1.0, -2.0, -0.5});
  const Tensor target = scalar_tensor(int64_t{1});
  EXPECT_NEAR(nll_loss(logp, target).item<double>(), 2.0, 1e-15);
  EXPECT_EQ(nll_loss(logp, target, {.reduction = Reduction::None}).dim(), 0);
}

TEST(NllLoss, AllIgnoredMeanIsNanSumIsZero) {
  const Tensor logp = random_uniform({3, 4}, -2, 0);
  const Tensor target = full({3}, kIgnore);
  EXPECT_TRUE(std::isnan(nll_loss(logp, target).item<double>()));
  EXPECT_EQ(nll_loss(logp, target, {.reduction = Reduction::Sum}).item<double>(), 0.0);
}

TEST(NllLoss, BadTargetsAreClearErrors) {
  const Tensor logp = random_uniform({3, 4}, -2, 0);
  EXPECT_KILN_ERROR(nll_loss(logp, tensor<int64_t>({0, 4, 1})), "nll_loss", "target 4", "[0, 4)");
  EXPECT_KILN_ERROR(nll_loss(logp, tensor<int64_t>({0, -3, 1})), "nll_loss", "target -3");
  EXPECT_KILN_ERROR(nll_loss(logp, tensor<int64_t>({0, 1})), "nll_loss", "[3]", "[2]");
  EXPECT_KILN_ERROR(nll_loss(logp, tensor<int32_t>({0, 1, 2})), "nll_loss", "Int64");
  EXPECT_KILN_ERROR(nll_loss(logp, tensor<int64_t>({0, 1, 2}), {.weight = ones({3}, {.dtype = DType::Float64})}),
                    "nll_loss", "weight", "[4]");
  EXPECT_KILN_ERROR(cross_entropy(logp, tensor<int64_t>({0, 9, 1})), "target 9");
}

TEST(CrossEntropy, MatchesReferenceWithWeightsIgnoreAndSmoothing) {
  IndexCase k = make_case(6, 5, 1, {0, 4, 1, kIgnore, 2, 4}, 3);
  expect_cross_entropy_matches(k);
  for (double smoothing : {0.1, 0.3, 1.0}) {
    k.smoothing = smoothing;
    k.weight = {};
    expect_cross_entropy_matches(k);
    k.weight = {0.5, 2.0, 1.5, 0.25, 1.0};
    expect_cross_entropy_matches(k);
  }
}

TEST(CrossEntropy, SpatialWithSmoothing) {
  IndexCase k = make_case(2, 3, 5, {0, 1, 2, 1, kIgnore, 2, 0, 0, 1, kIgnore}, 4);
  k.weight = {1.5, 0.5, 3.0};
  k.smoothing = 0.2;
  expect_cross_entropy_matches(k);
}

// Probability targets: -sum_c w_c t'_c log p_c with t' = (1 - e) t + e / C; Mean
// divides by the number of positions (N * S), whatever the weights.
Values reference_probability_loss(const Values& x, const Values& t, int64_t n, int64_t c, int64_t s,
                                  const Values& weight, double smoothing, Reduction reduction) {
  Values losses;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      double lse = 0;
      for (int64_t q = 0; q < c; ++q) lse += std::exp(x[(i * c + q) * s + j]);
      double loss = 0;
      for (int64_t q = 0; q < c; ++q) {
        const size_t at = static_cast<size_t>((i * c + q) * s + j);
        const double target = (1 - smoothing) * t[at] + smoothing / static_cast<double>(c);
        loss -= (weight.empty() ? 1.0 : weight[q]) * target * (x[at] - std::log(lse));
      }
      losses.push_back(loss);
    }
  }
  return reduce(losses, reduction, static_cast<double>(n * s));
}

TEST(CrossEntropy, ProbabilityTargets) {
  const Tensor x = random_uniform({3, 4, 2}, -3, 3, DType::Float64, 5);
  const Tensor t = softmax(random_uniform({3, 4, 2}, -1, 1, DType::Float64, 6), 1);
  const Values weight = {0.5, 2.0, 1.0, 3.0};
  for (Reduction r : kReductions) {
    for (double smoothing : {0.0, 0.25}) {
      for (bool weighted : {false, true}) {
        const Values w = weighted ? weight : Values{};
        const Tensor got = cross_entropy(x, t, {.weight = weighted ? tensor(weight) : Tensor(), .reduction = r,
                                                .label_smoothing = smoothing});
        const Values expected = reference_probability_loss(x.to_vector<double>(), t.to_vector<double>(), 3, 4, 2,
                                                           w, smoothing, r);
        EXPECT_TRUE(all_close(got, as_tensor(expected, r, {3, 2})));
      }
    }
  }
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  const Tensor x = tensor<float>({1000, 0, -1000, -1000, 1000, 0}, {2, 3}).requires_grad_(true);
  const Tensor loss = cross_entropy(x, tensor<int64_t>({0, 0}), {.reduction = Reduction::None});
  const std::vector<double> values = loss.to_vector<double>();
  EXPECT_NEAR(values[0], 0.0, 1e-6);
  EXPECT_NEAR(values[1], 2000.0, 1e-3);
  sum(loss).backward();
  for (double g : x.grad().to_vector<double>()) EXPECT_TRUE(std::isfinite(g));
  EXPECT_TRUE(all_close(x.grad(), tensor<float>({0, 0, 0, -1, 1, 0}, {2, 3})));
}

TEST(CrossEntropy, InvalidOptions) {
  const Tensor x = random_uniform({2, 3}, -1, 1);
  EXPECT_KILN_ERROR(cross_entropy(x, tensor<int64_t>({0, 1}), {.label_smoothing = 1.5}), "label_smoothing");
  EXPECT_KILN_ERROR(cross_entropy(x, random_uniform({2, 4}, 0, 1)), "cross_entropy", "[2, 3]", "[2, 4]");
}

// (1 - y) x + l (log(1 + exp(-|x|)) + max(-x, 0)) with l = 1 + (pw - 1) y, times weight.
Values reference_bce(const Values& x, const Values& y, const Values& weight, const Values& pos_weight,
                     int64_t classes, Reduction reduction) {
  Values losses;
  for (size_t i = 0; i < x.size(); ++i) {
    const double pw = pos_weight.empty() ? 1.0 : pos_weight[i % static_cast<size_t>(classes)];
    const double l = 1 + (pw - 1) * y[i];
    const double loss = (1 - y[i]) * x[i] + l * (std::log1p(std::exp(-std::abs(x[i]))) + std::max(-x[i], 0.0));
    losses.push_back(loss * (weight.empty() ? 1.0 : weight[i]));
  }
  return reduce(losses, reduction, static_cast<double>(x.size()));
}

TEST(BinaryCrossEntropyWithLogits, MatchesReferenceWithWeightAndPosWeight) {
  const Tensor x = random_uniform({4, 3}, -4, 4, DType::Float64, 7);
  const Tensor y = random_uniform({4, 3}, 0, 1, DType::Float64, 8);
  const Tensor w = random_uniform({4, 3}, 0.5, 2, DType::Float64, 9);
  const Values pos_weight = {3.0, 0.5, 1.5};
  for (Reduction r : kReductions) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool weighted = variant & 1, positive = variant & 2;
      const Tensor got =
          binary_cross_entropy_with_logits(x, y,
                                           {.weight = weighted ? w : Tensor(),
                                            .reduction = r,
                                            .pos_weight = positive ? tensor(pos_weight) : Tensor()});
      const Values expected = reference_bce(x.to_vector<double>(), y.to_vector<double>(),
                                            weighted ? w.to_vector<double>() : Values{},
                                            positive ? pos_weight : Values{}, 3, r);
      EXPECT_TRUE(all_close(got, as_tensor(expected, r, {4, 3}))) << "variant " << variant;
    }
  }
}

TEST(BinaryCrossEntropyWithLogits, LargeLogitsAndZeroLogit) {
  const Tensor x = tensor<float>({1000, -1000, 1000, -1000, 0}).requires_grad_(true);
  const Tensor y = tensor<float>({0, 1, 1, 0, 1});
  const Tensor loss = binary_cross_entropy_with_logits(x, y, {.reduction = Reduction::None});
  EXPECT_TRUE(all_close(loss, tensor<float>({1000, 1000, 0, 0, static_cast<float>(std::log(2.0))})));
  sum(loss).backward();
  // d/dx = sigmoid(x) - y: exact at x = 0 too (no kink in the formula used).
  EXPECT_TRUE(all_close(x.grad(), tensor<float>({1, -1, 0, 0, -0.5})));
}

TEST(BinaryCrossEntropyWithLogits, ShapeErrors) {
  EXPECT_KILN_ERROR(binary_cross_entropy_with_logits(random_uniform({2, 3}, -1, 1), random_uniform({3, 2}, 0, 1)),
                    "binary_cross_entropy_with_logits", "[3, 2]", "[2, 3]");
  EXPECT_KILN_ERROR(binary_cross_entropy_with_logits(random_uniform({2, 3}, -1, 1), random_uniform({2, 3}, 0, 1),
                                                     {.pos_weight = ones({4}, {.dtype = DType::Float64})}),
                    "binary_cross_entropy_with_logits");
}

// Note [Loss shapes]: a [4] target against weights of shape [4, 4] would widen the loss.
TEST(BinaryCrossEntropyWithLogits, WeightsMayBroadcastToTheInputButNotWidenIt) {
  const Tensor x = random_uniform({4, 1}, -1, 1, DType::Float32, 20);
  const Tensor y = random_uniform({4, 1}, 0, 1, DType::Float32, 21);
  EXPECT_KILN_ERROR(binary_cross_entropy_with_logits(x, y, {.weight = ones({4, 4})}),
                    "binary_cross_entropy_with_logits", "weight of shape [4, 4]", "input shape [4, 1]");
  EXPECT_KILN_ERROR(binary_cross_entropy_with_logits(x, y, {.pos_weight = ones({3})}),
                    "binary_cross_entropy_with_logits", "pos_weight of shape [3]", "input shape [4, 1]");
  EXPECT_KILN_ERROR(binary_cross_entropy_with_logits(x, random_uniform({4}, 0, 1)),
                    "binary_cross_entropy_with_logits", "[4, 1]", "[4]");
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1}, {4, 1}, {}}) {
    const Tensor w = full(shape, 2.0);
    EXPECT_EQ(binary_cross_entropy_with_logits(x, y, {.weight = w, .reduction = Reduction::None}).sizes(),
              x.sizes());
    EXPECT_EQ(binary_cross_entropy_with_logits(x, y, {.reduction = Reduction::None, .pos_weight = w}).sizes(),
              x.sizes());
  }
}

Values reference_regression(const Values& x, const Values& y, Reduction reduction, const char* kind, double beta) {
  Values losses;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - y[i];
    const std::string k = kind;
    if (k == "mse") losses.push_back(d * d);
    else if (k == "l1" || beta == 0) losses.push_back(std::abs(d));
    else losses.push_back(std::abs(d) < beta ? 0.5 * d * d / beta : std::abs(d) - 0.5 * beta);
  }
  return reduce(losses, reduction, static_cast<double>(x.size()));
}

TEST(RegressionLosses, MatchReference) {
  const Tensor x = random_uniform({3, 5}, -2, 2, DType::Float64, 10);
  const Tensor y = random_uniform({3, 5}, -2, 2, DType::Float64, 11);
  const Values xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (Reduction r : kReductions) {
    EXPECT_TRUE(all_close(mse_loss(x, y, r), as_tensor(reference_regression(xv, yv, r, "mse", 0), r, {3, 5})));
    EXPECT_TRUE(all_close(l1_loss(x, y, r), as_tensor(reference_regression(xv, yv, r, "l1", 0), r, {3, 5})));
    for (double beta : {1.0, 0.5, 0.0}) {
      EXPECT_TRUE(all_close(smooth_l1_loss(x, y, r, beta),
                            as_tensor(reference_regression(xv, yv, r, "smooth", beta), r, {3, 5})))
          << "beta " << beta;
    }
  }
  EXPECT_KILN_ERROR(mse_loss(x, random_uniform({4}, 0, 1)), "mse_loss");
  EXPECT_KILN_ERROR(smooth_l1_loss(x, y, Reduction::Mean, -1.0), "smooth_l1_loss", "beta");
}

// Note [Loss shapes]: a [4, 1] prediction against a [4] target broadcasts to [4, 4] and
// would average all 16 pairings; shapes that differ are an error even when they broadcast
// (the nn:: modules call these functions: tests/nn/test_layers.cpp).
TEST(RegressionLosses, ShapesThatDifferAreAnErrorEvenWhenTheyBroadcast) {
  using Loss = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Loss> kLosses[] = {
      {"mse_loss", [](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }},
      {"l1_loss", [](const Tensor& a, const Tensor& b) { return l1_loss(a, b); }},
      {"smooth_l1_loss", [](const Tensor& a, const Tensor& b) { return smooth_l1_loss(a, b); }},
  };
  const Tensor column = random_uniform({4, 1}, -1, 1, DType::Float32, 30);
  const Tensor row = random_uniform({4}, -1, 1, DType::Float32, 31);
  for (const auto& [name, loss] : kLosses) {
    SCOPED_TRACE(name);
    EXPECT_KILN_ERROR(loss(column, row), name, "input shape [4, 1]", "target shape [4]");
    EXPECT_KILN_ERROR(loss(row, column), name, "input shape [4]", "target shape [4, 1]");
    EXPECT_KILN_ERROR(loss(row, full({}, 0.5)), name, "target shape []");
    EXPECT_EQ(loss(column, row.unsqueeze(1)).dim(), 0);
  }
}

// ---- gradient checks (float64) -----------------------------------------------------------

KILN_GRADCHECK_TEST(nll_loss) {
  const Tensor target = tensor<int64_t>({0, 2, kIgnore, 1, 2, 0}, {2, 3});
  const Tensor weight = tensor<double>({0.5, 2.0, 1.5});
  for (Reduction r : kReductions) {
    EXPECT_TRUE(gradcheck([&](const Inputs& v) { return nll_loss(v[0], target, {.weight = weight, .reduction = r}); },
                          {testing::grad_leaf({2, 3, 3}, 1)}));
  }
}

KILN_GRADCHECK_TEST(cross_entropy) {
  const Tensor target = tensor<int64_t>({0, 2, kIgnore, 1}, {4});
  const Tensor weight = tensor<double>({0.5, 2.0, 1.5});
  for (Reduction r : kReductions) {
    EXPECT_TRUE(gradcheck([&](const Inputs& v) {
      return cross_entropy(v[0], target, {.weight = weight, .reduction = r, .label_smoothing = 0.2});
    }, {testing::strided_grad_leaf({4, 3}, 2)}));
  }
  // Probability targets: gradients for both the logits and the target.
  EXPECT_TRUE(gradcheck([&](const Inputs& v) {
    return cross_entropy(v[0], v[1], {.weight = weight, .label_smoothing = 0.1});
  }, {testing::grad_leaf({2, 3, 2}, 3), testing::grad_leaf({2, 3, 2}, 4)}));
}

KILN_GRADCHECK_TEST(binary_cross_entropy_with_logits) {
  const Tensor pos_weight = tensor<double>({2.0, 0.5, 1.5});
  EXPECT_TRUE(gradcheck([&](const Inputs& v) {
    return binary_cross_entropy_with_logits(v[0], v[1], {.weight = v[2], .pos_weight = pos_weight});
  }, {testing::grad_leaf({4, 3}, 5), random_uniform({4, 3}, 0, 1, DType::Float64, 6).requires_grad_(true),
      testing::grad_leaf({4, 3}, 7)}));
  EXPECT_TRUE(gradcheck([&](const Inputs& v) {
    return binary_cross_entropy_with_logits(v[0], v[1], {.reduction = Reduction::None});
  }, {testing::strided_grad_leaf({2, 3}, 8), random_uniform({2, 3}, 0, 1, DType::Float64, 9)}));
}

KILN_GRADCHECK_TEST(mse_loss) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mse_loss(v[0], v[1]); },
                        {testing::grad_leaf({3, 4}, 10), testing::strided_grad_leaf({3, 4}, 11)}));
}

KILN_GRADCHECK_TEST(l1_loss) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return l1_loss(v[0], v[1], Reduction::Sum); },
                        {testing::grad_leaf({3, 4}, 12), testing::grad_leaf({3, 4}, 13)}));
}

KILN_GRADCHECK_TEST(smooth_l1_loss) {
  for (double beta : {1.0, 0.3}) {
    EXPECT_TRUE(gradcheck([beta](const Inputs& v) { return smooth_l1_loss(v[0], v[1], Reduction::Mean, beta); },
                          {testing::grad_leaf({3, 4}, 14), testing::grad_leaf({3, 4}, 15)}));
  }
}

}  // namespace
}  // namespace kiln
