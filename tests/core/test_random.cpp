// Random factories and dropout (core/ops/random.h): reproducibility (same seed and
// offset -> same numbers; anything else -> different), the range and the statistics of
// each distribution in every dtype, dropout's masks, scale and gradient, and the error
// messages. The exact element-to-counter mapping is pinned in test_philox.cpp.
//
// Statistical bounds are loose (many standard errors wide) but still fail for a wrong
// distribution: the seeds are fixed, so a test cannot flake.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;

const DType kFloatTypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16};

struct Moments {
  double mean = 0, variance = 0, min = 0, max = 0;
};

// Mean, population variance, min and max, in double, by a plain loop.
Moments moments_of(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  Moments m;
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= static_cast<double>(v.size());
  return m;
}

double fraction_where(const Tensor& t, bool (*predicate)(double)) {
  const std::vector<double> v = t.to_vector<double>();
  return static_cast<double>(std::count_if(v.begin(), v.end(), predicate)) / static_cast<double>(v.size());
}

// ---- reproducibility ------------------------------------------------------------------

TEST(Random, SameSeedGivesTheSameNumbers) {
  for (DType dtype : kFloatTypes) {
    Generator a(42), b(42);
    EXPECT_TRUE(all_equal(rand({3, 17}, {.dtype = dtype}, &a), rand({3, 17}, {.dtype = dtype}, &b))) << dtype;
    EXPECT_TRUE(all_equal(randn({33}, {.dtype = dtype}, &a), randn({33}, {.dtype = dtype}, &b))) << dtype;
  }
  Generator a(7), b(7);
  EXPECT_TRUE(all_equal(randint(-4, 9, {50}, {}, &a), randint(-4, 9, {50}, {}, &b)));
  EXPECT_TRUE(all_equal(randperm(50, {}, &a), randperm(50, {}, &b)));
  EXPECT_TRUE(all_equal(bernoulli({50}, 0.5, {}, &a), bernoulli({50}, 0.5, {}, &b)));
}

TEST(Random, DefaultGeneratorFollowsManualSeed) {
  manual_seed(123);
  const Tensor a = randn({20});
  const Tensor b = randint(0, 100, {20});
  manual_seed(123);
  EXPECT_TRUE(all_equal(randn({20}), a));
  EXPECT_TRUE(all_equal(randint(0, 100, {20}), b));
  manual_seed(124);
  EXPECT_FALSE(all_equal(randn({20}), a));
  manual_seed(kDefaultSeed);
}

TEST(Random, DifferentSeedOrOffsetGivesDifferentNumbers) {
  Generator a(1), b(2);
  EXPECT_FALSE(all_equal(rand({64}, {}, &a), rand({64}, {}, &b)));
  Generator c(1), d(1);
  d.set_state({1, 1000});
  EXPECT_FALSE(all_equal(rand({64}, {}, &c), rand({64}, {}, &d)));
}

TEST(Random, ConsecutiveCallsDiffer) {
  Generator g(3);
  const Tensor first = rand({64}, {}, &g);
  const Tensor second = rand({64}, {}, &g);
  EXPECT_FALSE(all_equal(first, second));
  const Tensor p1 = randperm(64, {}, &g), p2 = randperm(64, {}, &g);
  EXPECT_FALSE(all_equal(p1, p2));
  // No element repeats across the two calls either (they use disjoint blocks).
  const std::vector<float> v1 = first.to_vector<float>(), v2 = second.to_vector<float>();
  const std::set<float> seen(v1.begin(), v1.end());
  for (float x : v2) EXPECT_FALSE(seen.count(x) && x != 0.0f) << x;
}

// ---- uniform and normal ---------------------------------------------------------------

TEST(Random, RandIsUniformOnZeroOne) {
  for (DType dtype : kFloatTypes) {
    Generator g(11);
    const Tensor u = rand({1000, 1000}, {.dtype = dtype}, &g);
    EXPECT_EQ(u.dtype(), dtype);
    EXPECT_EQ(u.sizes(), (std::vector<int64_t>{1000, 1000}));
    const Moments m = moments_of(u);
    EXPECT_GE(m.min, 0.0) << dtype;
    EXPECT_LT(m.max, 1.0) << dtype << ": rand must never return 1";
    EXPECT_LT(m.min, 0.01) << dtype;
    EXPECT_GT(m.max, 0.99) << dtype;
    EXPECT_NEAR(m.mean, 0.5, 0.005) << dtype;         // standard error 0.0003
    EXPECT_NEAR(m.variance, 1.0 / 12, 0.002) << dtype;  // standard error 0.00008
    EXPECT_NEAR(fraction_where(u, [](double x) { return x < 0.25; }), 0.25, 0.005) << dtype;
  }
}

TEST(Random, RandnIsStandardNormal) {
  for (DType dtype : kFloatTypes) {
    Generator g(12);
    const Tensor z = randn({1'000'000}, {.dtype = dtype}, &g);
    const Moments m = moments_of(z);
    EXPECT_NEAR(m.mean, 0.0, 0.01) << dtype;     // standard error 0.001
    EXPECT_NEAR(m.variance, 1.0, 0.015) << dtype;  // standard error 0.0014
    EXPECT_NEAR(fraction_where(z, [](double x) { return std::abs(x) < 1; }), 0.6827, 0.005) << dtype;
    EXPECT_NEAR(fraction_where(z, [](double x) { return x > 2; }), 0.02275, 0.002) << dtype;
    EXPECT_LT(m.min, -4.0) << dtype;  // the tails exist
    EXPECT_GT(m.max, 4.0) << dtype;
  }
}

TEST(Random, LikeFactoriesFollowTheTensor) {
  const Tensor like = zeros({4, 5}, {.dtype = DType::Float64});
  Generator a(5), b(5);
  const Tensor u = rand_like(like, &a);
  EXPECT_EQ(u.sizes(), like.sizes());
  EXPECT_EQ(u.dtype(), DType::Float64);
  EXPECT_TRUE(all_equal(u, rand({4, 5}, {.dtype = DType::Float64}, &b)));
  const Tensor z = randn_like(like.to(DType::Float16), &a);
  EXPECT_EQ(z.dtype(), DType::Float16);
  EXPECT_TRUE(all_equal(z, randn({4, 5}, {.dtype = DType::Float16}, &b)));
  EXPECT_FALSE(u.requires_grad());
}

TEST(Random, RequiresGradAndEmptyShapes) {
  Generator g(1);
  EXPECT_TRUE(rand({3}, {.dtype = std::nullopt, .requires_grad = true}, &g).requires_grad());
  EXPECT_TRUE(randn({3}, {.dtype = DType::Float64, .requires_grad = true}, &g).requires_grad());
  EXPECT_EQ(rand({0, 3}, {}, &g).numel(), 0);
  EXPECT_EQ(g.offset(), 4u);  // 3 + 3 elements, nothing for the empty one
  EXPECT_EQ(rand({}, {}, &g).dim(), 0);
}

// ---- integers, permutations, coins ----------------------------------------------------

TEST(Random, RandintCoversLowToHighExclusive) {
  for (DType dtype : {DType::Int64, DType::Int32, DType::UInt8, DType::Float32, DType::Float64}) {
    const int64_t low = dtype == DType::UInt8 ? 3 : -3, high = low + 7;
    Generator g(21);
    const Tensor r = randint(low, high, {70'000}, {.dtype = dtype}, &g);
    EXPECT_EQ(r.dtype(), dtype);
    std::map<int64_t, int> counts;
    for (double v : r.to_vector<double>()) {
      ASSERT_EQ(v, std::floor(v)) << dtype;
      counts[static_cast<int64_t>(v)]++;
    }
    ASSERT_EQ(counts.size(), 7u) << dtype;
    EXPECT_EQ(counts.begin()->first, low) << dtype;
    EXPECT_EQ(counts.rbegin()->first, high - 1) << dtype;
    for (const auto& [value, count] : counts) EXPECT_NEAR(count, 10'000, 500) << dtype << " value " << value;
  }
  Generator g(1);
  EXPECT_EQ(randint(0, 10, {3}, {}, &g).dtype(), DType::Int64);
  EXPECT_TRUE(all_equal(randint(5, 6, {4}, {}, &g), full({4}, 5)));
  // The edges of each dtype are allowed.
  EXPECT_EQ(randint(0, 256, {3}, {.dtype = DType::UInt8}, &g).dtype(), DType::UInt8);
  EXPECT_EQ(randint(-2048, 2049, {3}, {.dtype = DType::Float16}, &g).dtype(), DType::Float16);
  EXPECT_EQ(randperm(2049, {.dtype = DType::Float16}, &g).numel(), 2049);
  // A range wider than 2^32 (the draw uses 64 bits).
  const std::vector<int64_t> wide = randint(0, int64_t{1} << 40, {1000}, {}, &g).to_vector<int64_t>();
  EXPECT_GT(*std::max_element(wide.begin(), wide.end()), int64_t{1} << 39);
}

TEST(Random, RandpermIsAPermutation) {
  Generator g(8);
  EXPECT_EQ(randperm(0, {}, &g).sizes(), (std::vector<int64_t>{0}));
  EXPECT_EQ(randperm(1, {}, &g).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  for (DType dtype : {DType::Int64, DType::Int32, DType::Float32}) {
    const Tensor p = randperm(1000, {.dtype = dtype}, &g);
    EXPECT_EQ(p.dtype(), dtype);
    std::vector<int64_t> v = p.to_vector<int64_t>();
    std::vector<int64_t> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i) << dtype;
    int64_t fixed_points = 0;
    for (int64_t i = 0; i < 1000; ++i) fixed_points += v[i] == i;
    EXPECT_LT(fixed_points, 10) << "a shuffled permutation has about one fixed point";
  }
}

TEST(Random, BernoulliFrequency) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Bool, DType::Int64}) {
    Generator g(31);
    const Tensor b = bernoulli({1'000'000}, 0.3, {.dtype = dtype}, &g);
    EXPECT_EQ(b.dtype(), dtype);
    const std::vector<double> v = b.to_vector<double>();
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return x == 0 || x == 1; })) << dtype;
    EXPECT_NEAR(moments_of(b).mean, 0.3, 0.003) << dtype;  // standard error 0.0005
  }
  Generator g(1);
  EXPECT_TRUE(all_equal(bernoulli({100}, 0.0, {}, &g), zeros({100})));
  EXPECT_TRUE(all_equal(bernoulli({100}, 1.0, {}, &g), ones({100})));
  EXPECT_EQ(bernoulli({4}, 0.5, {}, &g).dtype(), DType::Float32);
}

// ---- dropout --------------------------------------------------------------------------

TEST(Dropout, IdentityWhenNotTrainingOrPZero) {
  const Tensor x = random_nonzero({5, 6}, DType::Float32);
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, /*training=*/true).is_same(x));
  EXPECT_TRUE(dropout(x, 1.0, /*training=*/false).is_same(x));
}

TEST(Dropout, POneGivesZeros) {
  for (DType dtype : kFloatTypes) {
    const Tensor x = random_nonzero({7, 3}, dtype);
    EXPECT_TRUE(all_equal(dropout(x, 1.0), zeros({7, 3}, {.dtype = dtype}))) << dtype;
  }
}

TEST(Dropout, KeepsAndScalesWithTheRightFrequency) {
  const double p = 0.3;
  for (DType dtype : kFloatTypes) {
    const Tensor x = random_nonzero({500, 400}, dtype, 4);
    Generator g(17);
    const Tensor y = dropout(x, p, true, &g);
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(y.sizes(), x.sizes());
    const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
    const testing::Tolerance tol = testing::tolerance_for(dtype);
    int64_t kept = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
      if (yv[i] == 0) continue;
      ++kept;
      const double expected = xv[i] / (1 - p);
      ASSERT_LE(std::abs(yv[i] - expected), tol.atol + tol.rtol * std::abs(expected))
          << dtype << " element " << i << ": " << yv[i] << " vs " << expected;
    }
    EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(xv.size()), 1 - p, 0.005) << dtype;
  }
}

TEST(Dropout, NonContiguousInputAndSameGeneratorSameMask) {
  const Tensor x = non_contiguous(random_nonzero({6, 9}));
  Generator a(3), b(3);
  const Tensor y1 = dropout(x, 0.5, true, &a);
  const Tensor y2 = dropout(x.contiguous(), 0.5, true, &b);
  EXPECT_TRUE(all_equal(y1, y2));
}

TEST(Dropout, GradientUsesTheSameMask) {
  const Tensor x = random_nonzero({40, 30}).requires_grad_(true);
  Generator g(9);
  const Tensor y = dropout(x, 0.25, true, &g);
  y.backward(ones_like(y));
  const std::vector<double> yv = y.to_vector<double>(), gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) {
    EXPECT_DOUBLE_EQ(gv[i], yv[i] == 0 ? 0.0 : 1 / 0.75) << i;
  }
}

KILN_GRADCHECK_TEST(dropout) {
  // A fresh generator per call: every evaluation draws the same mask.
  const testing::GradcheckFn fn = [](const std::vector<Tensor>& in) {
    Generator g(2024);
    return dropout(in[0], 0.4, true, &g);
  };
  EXPECT_TRUE(gradcheck(fn, {random_nonzero({4, 5}).requires_grad_(true)}));
  EXPECT_TRUE(gradcheck(fn, {non_contiguous(random_nonzero({3, 7})).requires_grad_(true)}));
}

// ---- errors ---------------------------------------------------------------------------

TEST(Random, Errors) {
  EXPECT_KILN_ERROR(randint(5, 5, {3}), "randint", "low (5) must be less than high (5)");
  EXPECT_KILN_ERROR(randint(6, 2, {3}), "randint", "low (6) must be less than high (2)");
  EXPECT_KILN_ERROR(randint(0, 2, {3}, {.dtype = DType::Bool}), "randint: bool is not a valid dtype");
  EXPECT_KILN_ERROR(bernoulli({3}, 1.5), "bernoulli: p must be in [0, 1], got 1.5");
  EXPECT_KILN_ERROR(bernoulli({3}, -0.1), "bernoulli: p must be in [0, 1], got -0.1");
  EXPECT_KILN_ERROR(rand({3}, {.dtype = DType::Int64}), "rand: needs a floating dtype, got int64");
  EXPECT_KILN_ERROR(randn({3}, {.dtype = DType::Int32}), "randn: needs a floating dtype, got int32");
  EXPECT_KILN_ERROR(rand_like(zeros({2}, {.dtype = DType::UInt8})), "rand: needs a floating dtype, got uint8");
  EXPECT_KILN_ERROR(randperm(-1), "randperm: n must be non-negative, got -1");
  EXPECT_KILN_ERROR(randperm(4, {.dtype = DType::Bool}), "randperm: unsupported dtype bool");
  EXPECT_KILN_ERROR(randperm(3000, {.dtype = DType::Float16}), "randperm: n = 3000 does not fit in float16");
  EXPECT_KILN_ERROR(randint(0, 257, {3}, {.dtype = DType::UInt8}), "randint: [0, 257) does not fit in uint8");
  EXPECT_KILN_ERROR(randint(-1, 5, {3}, {.dtype = DType::UInt8}), "randint: [-1, 5) does not fit in uint8");
  EXPECT_KILN_ERROR(randint(0, int64_t{1} << 32, {3}, {.dtype = DType::Int32}), "does not fit in int32");
  EXPECT_KILN_ERROR(randint(0, 300, {3}, {.dtype = DType::BFloat16}), "randint: [0, 300) does not fit in bfloat16");
  EXPECT_KILN_ERROR(rand({-2, 3}), "negative dimension", "[-2, 3]");
  const Tensor x = ones({3});
  EXPECT_KILN_ERROR(dropout(x, 1.5), "dropout: probability has to be between 0 and 1, but got 1.5");
  EXPECT_KILN_ERROR(dropout(x, -0.5), "dropout: probability has to be between 0 and 1, but got -0.5");
  EXPECT_KILN_ERROR(dropout(ones({3}, {.dtype = DType::Int64}), 0.5), "dropout: expected a floating-point tensor",
                    "int64");
  EXPECT_KILN_ERROR(dropout(Tensor(), 0.5), "dropout: undefined tensor");
}

}  // namespace
}  // namespace kiln
