// batch_norm against reference loops in double: training (batch statistics) and eval
// (running statistics), the running-statistics update after one and two steps, affine and
// not, no running statistics, 1d/2d/3d inputs, eps, non-contiguous and half-precision
// inputs; which gradients are computed; every validation error; gradient checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "core/ops/batch_norm_pieces.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;
using testing::random_uniform;
using testing::tolerance_for;

// Per-channel statistics of x [N, C, *] by plain loops in double.
struct ReferenceStats {
  std::vector<double> mean, biased_var, unbiased_var;
};

ReferenceStats reference_stats(const Tensor& x) {
  const std::vector<double> v = x.to_vector<double>();
  const int64_t n = x.sizes()[0], c = x.sizes()[1], s = x.numel() / (n * c);
  ReferenceStats r;
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < s; ++j) sum += v[(i * c + ch) * s + j];
    }
    const double mean = sum / static_cast<double>(n * s);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < s; ++j) sq += (v[(i * c + ch) * s + j] - mean) * (v[(i * c + ch) * s + j] - mean);
    }
    r.mean.push_back(mean);
    r.biased_var.push_back(sq / static_cast<double>(n * s));
    r.unbiased_var.push_back(sq / static_cast<double>(n * s - 1));
  }
  return r;
}

// (x - mean) / sqrt(var + eps) * weight + bias in double; empty weight/bias: 1/0.
Tensor reference_normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                           const std::vector<double>& weight, const std::vector<double>& bias, double eps) {
  const std::vector<double> v = x.to_vector<double>();
  const int64_t n = x.sizes()[0], c = x.sizes()[1], s = x.numel() / (n * c);
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t j = 0; j < s; ++j) {
        const int64_t k = (i * c + ch) * s + j;
        const double w = weight.empty() ? 1.0 : weight[ch], b = bias.empty() ? 0.0 : bias[ch];
        out[k] = (v[k] - mean[ch]) / std::sqrt(var[ch] + eps) * w + b;
      }
    }
  }
  return tensor(out, x.sizes());
}

// Inputs with a different offset and scale per channel, so statistics differ by channel.
Tensor channel_input(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  std::vector<int64_t> per_channel(sizes.size(), 1);
  per_channel[1] = sizes[1];
  const Tensor offset = random_uniform(per_channel, -3, 3, DType::Float64, seed + 100);
  const Tensor scale = random_uniform(per_channel, 0.5, 4, DType::Float64, seed + 200);
  return add(mul(random_nonzero(sizes, DType::Float64, seed), scale), offset).to(dtype);
}

const std::vector<std::vector<int64_t>> kShapes = {{6, 3}, {4, 3, 5}, {2, 3, 4, 5}, {2, 3, 2, 3, 4}};

TEST(BatchNorm, TrainingNormalisesWithTheBatchStatistics) {
  for (const auto& sizes : kShapes) {
    for (bool affine : {true, false}) {
      const Tensor x = channel_input(sizes, DType::Float64, 1);
      const Tensor w = affine ? random_nonzero({3}, DType::Float64, 2) : Tensor();
      const Tensor b = affine ? random_nonzero({3}, DType::Float64, 3) : Tensor();
      const Tensor y = batch_norm(x, zeros({3}, {.dtype = DType::Float64}), ones({3}, {.dtype = DType::Float64}), w, b,
                                  /*training=*/true);
      const ReferenceStats r = reference_stats(x);
      const Tensor expected = reference_normalize(x, r.mean, r.biased_var, affine ? w.to_vector<double>() : std::vector<double>{},
                                                  affine ? b.to_vector<double>() : std::vector<double>{}, 1e-5);
      EXPECT_TRUE(all_close(y, expected)) << "sizes " << ::testing::PrintToString(sizes) << " affine " << affine;
    }
  }
}

TEST(BatchNorm, RunningStatisticsAfterOneAndTwoSteps) {
  for (double momentum : {0.1, 0.35}) {
    for (const auto& sizes : kShapes) {
      Tensor running_mean = zeros({3}), running_var = ones({3});
      std::vector<double> expected_mean(3, 0.0), expected_var(3, 1.0);
      for (uint64_t step = 0; step < 2; ++step) {
        const Tensor x = channel_input(sizes, DType::Float32, 10 + step);
        batch_norm(x, running_mean, running_var, Tensor(), Tensor(), /*training=*/true, momentum);
        const ReferenceStats r = reference_stats(x);
        for (int c = 0; c < 3; ++c) {
          expected_mean[c] = (1 - momentum) * expected_mean[c] + momentum * r.mean[c];
          expected_var[c] = (1 - momentum) * expected_var[c] + momentum * r.unbiased_var[c];
        }
        EXPECT_TRUE(all_close(running_mean, tensor(expected_mean), {1e-5, 1e-5})) << "step " << step + 1;
        EXPECT_TRUE(all_close(running_var, tensor(expected_var), {1e-5, 1e-5})) << "step " << step + 1;
      }
    }
  }
}

TEST(BatchNorm, EvalNormalisesWithTheRunningStatisticsAndLeavesThemAlone) {
  for (const auto& sizes : kShapes) {
    for (bool affine : {true, false}) {
      const Tensor x = channel_input(sizes, DType::Float64, 4);
      const Tensor running_mean = random_uniform({3}, -1, 1, DType::Float64, 5);
      const Tensor running_var = random_uniform({3}, 0.5, 2, DType::Float64, 6);
      const Tensor mean_before = running_mean.clone(), var_before = running_var.clone();
      const Tensor w = affine ? random_nonzero({3}, DType::Float64, 7) : Tensor();
      const Tensor b = affine ? random_nonzero({3}, DType::Float64, 8) : Tensor();
      const Tensor y = batch_norm(x, running_mean, running_var, w, b, /*training=*/false, 0.1, 1e-3);
      const Tensor expected =
          reference_normalize(x, running_mean.to_vector<double>(), running_var.to_vector<double>(),
                              affine ? w.to_vector<double>() : std::vector<double>{},
                              affine ? b.to_vector<double>() : std::vector<double>{}, 1e-3);
      EXPECT_TRUE(all_close(y, expected));
      EXPECT_TRUE(testing::all_equal(running_mean, mean_before));
      EXPECT_TRUE(testing::all_equal(running_var, var_before));
    }
  }
}

TEST(BatchNorm, TrainingWithoutRunningStatistics) {
  const Tensor x = channel_input({4, 3, 6}, DType::Float64, 9);
  const Tensor with = batch_norm(x, zeros({3}, {.dtype = DType::Float64}), ones({3}, {.dtype = DType::Float64}),
                                 Tensor(), Tensor(), true);
  const Tensor without = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  EXPECT_TRUE(testing::all_equal(without, with));
}

TEST(BatchNorm, EpsIsAddedToTheVariance) {
  const Tensor x = channel_input({4, 3, 5}, DType::Float64, 11);
  const ReferenceStats r = reference_stats(x);
  for (double eps : {0.0, 1e-5, 0.5, 3.0}) {
    const Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, eps);
    EXPECT_TRUE(all_close(y, reference_normalize(x, r.mean, r.biased_var, {}, {}, eps))) << "eps " << eps;
  }
  const Tensor small = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  const Tensor large = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 3.0);
  EXPECT_LT(large.abs().max().item<double>(), small.abs().max().item<double>());
}

TEST(BatchNorm, NonContiguousInput) {
  const Tensor x = channel_input({4, 3, 7}, DType::Float64, 12);
  const Tensor w = random_nonzero({3}, DType::Float64, 13), b = random_nonzero({3}, DType::Float64, 14);
  EXPECT_TRUE(all_close(batch_norm(non_contiguous(x), Tensor(), Tensor(), non_contiguous(w), b, true),
                        batch_norm(x, Tensor(), Tensor(), w, b, true)));
  // channels last in memory: a permuted view
  const Tensor cl = x.permute({0, 2, 1}).contiguous().permute({0, 2, 1});
  EXPECT_TRUE(all_close(batch_norm(cl, Tensor(), Tensor(), w, b, true), batch_norm(x, Tensor(), Tensor(), w, b, true)));
}

TEST(BatchNorm, HalfInputsKeepTheirDtypeWithFloatStatistics) {
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    const Tensor x = channel_input({4, 3, 2, 5}, dtype, 15);
    Tensor running_mean = zeros({3}), running_var = ones({3});
    const Tensor w = random_nonzero({3}, DType::Float32, 16), b = random_nonzero({3}, DType::Float32, 17);
    const Tensor y = batch_norm(x, running_mean, running_var, w, b, true, 0.1);
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(running_mean.dtype(), DType::Float32);
    const ReferenceStats r = reference_stats(x);  // of the rounded values
    const Tensor expected = reference_normalize(x, r.mean, r.biased_var, w.to_vector<double>(), b.to_vector<double>(), 1e-5);
    EXPECT_TRUE(all_close(y, expected.to(dtype), tolerance_for(dtype))) << dtype;
    std::vector<double> expected_mean(3);
    for (int c = 0; c < 3; ++c) expected_mean[c] = 0.1 * r.mean[c];
    EXPECT_TRUE(all_close(running_mean, tensor(expected_mean), {1e-5, 1e-5}));
    // eval with float32 running statistics and half input
    const Tensor y_eval = batch_norm(x, running_mean, running_var, w, b, false);
    EXPECT_EQ(y_eval.dtype(), dtype);
  }
}

TEST(BatchNorm, ComputesOnlyTheGradientsThatAreNeeded) {
  const Tensor x = channel_input({4, 3, 5}, DType::Float64, 18);
  const Tensor w = random_nonzero({3}, DType::Float64, 19).requires_grad_(true);
  const Tensor b = random_nonzero({3}, DType::Float64, 20);
  batch_norm(x, Tensor(), Tensor(), w, b, true).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  // d(sum y)/dweight = sum of the normalised values = 0 per channel in training
  EXPECT_TRUE(all_close(w.grad(), zeros({3}, {.dtype = DType::Float64}), {1e-10, 0}));
}

TEST(BatchNorm, HalfBackwardGivesGradientsInTheParametersDtypes) {
  const Tensor x = channel_input({4, 3, 5}, DType::Float16, 21).requires_grad_(true);
  const Tensor w = random_nonzero({3}, DType::Float32, 22).requires_grad_(true);
  const Tensor b = random_nonzero({3}, DType::Float32, 23).requires_grad_(true);
  const Tensor g = random_nonzero({4, 3, 5}, DType::Float16, 24);
  batch_norm(x, Tensor(), Tensor(), w, b, true).backward(g);
  EXPECT_EQ(x.grad().dtype(), DType::Float16);
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  // against the same computation in double
  const Tensor xd = x.detach().to(DType::Float64).requires_grad_(true);
  const Tensor wd = w.detach().to(DType::Float64).requires_grad_(true);
  const Tensor bd = b.detach().to(DType::Float64).requires_grad_(true);
  batch_norm(xd, Tensor(), Tensor(), wd, bd, true).backward(g.to(DType::Float64));
  EXPECT_TRUE(all_close(x.grad(), xd.grad().to(DType::Float16), {1e-2, 1e-2}));
  EXPECT_TRUE(all_close(w.grad(), wd.grad(), {1e-4, 1e-4}));
  EXPECT_TRUE(all_close(b.grad(), bd.grad(), {1e-4, 1e-4}));
}

TEST(BatchNorm, Errors) {
  const Tensor x = random_nonzero({4, 3, 5});
  const TensorOptions f64{.dtype = DType::Float64};
  const Tensor c3 = ones({3}, f64);
  EXPECT_KILN_ERROR(batch_norm(random_nonzero({5}), Tensor(), Tensor(), Tensor(), Tensor(), true), "batch_norm",
                    "rank >= 2", "[5]");
  EXPECT_KILN_ERROR(batch_norm(ones({4, 3}, {.dtype = DType::Int64}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "batch_norm", "floating-point", "int64");
  EXPECT_KILN_ERROR(batch_norm(x, Tensor(), Tensor(), ones({4}, f64), Tensor(), true), "batch_norm", "weight",
                    "[3]", "[4]");
  EXPECT_KILN_ERROR(batch_norm(x, Tensor(), Tensor(), Tensor(), ones({1, 3}, f64), true), "bias", "[3]", "[1, 3]");
  EXPECT_KILN_ERROR(batch_norm(x, Tensor(), Tensor(), ones({3}, {.dtype = DType::Int32}), Tensor(), true), "weight",
                    "floating point", "int32");
  EXPECT_KILN_ERROR(batch_norm(x, ones({2}, f64), ones({2}, f64), Tensor(), Tensor(), true), "running_mean", "[3]",
                    "[2]");
  EXPECT_KILN_ERROR(batch_norm(x, c3, ones({5}, f64), Tensor(), Tensor(), true), "running_var", "[3]", "[5]");
  EXPECT_KILN_ERROR(batch_norm(x, c3, Tensor(), Tensor(), Tensor(), true), "both defined", "running_mean alone");
  EXPECT_KILN_ERROR(batch_norm(x, Tensor(), c3, Tensor(), Tensor(), true), "both defined", "running_var alone");
  EXPECT_KILN_ERROR(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), "batch_norm",
                    "must be defined in evaluation mode");
  EXPECT_KILN_ERROR(batch_norm(random_nonzero({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "Expected more than 1 value per channel when training", "[1, 3]");
  EXPECT_KILN_ERROR(batch_norm(random_nonzero({1, 3, 1, 1}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "Expected more than 1 value per channel when training", "[1, 3, 1, 1]");
  EXPECT_KILN_ERROR(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, -1.0), "eps", "-1");
  EXPECT_KILN_ERROR(batch_norm(Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), true), "batch_norm", "undefined");
  // one value per channel is fine in eval
  EXPECT_NO_THROW(batch_norm(random_nonzero({1, 3}), c3, c3, Tensor(), Tensor(), false));
  if (cuda_is_available()) {
    EXPECT_KILN_ERROR(batch_norm(x, Tensor(), Tensor(), c3.to(Device::cuda(0)), Tensor(), true), "weight", "is on",
                      "but input is on");
  }
}

// ---- gradient checks ------------------------------------------------------------------------

using Inputs = std::vector<Tensor>;

Tensor leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return random_uniform(sizes, -2, 2, DType::Float64, seed).requires_grad_(true);
}

// Note [Batch norm with ReLU]: the fused op gives relu(batch_norm(...)) exactly, outputs,
// running statistics and gradients, in every dtype, training and eval, affine or not (the
// kernels compute the same values; the mask of y > 0 is relu's on the output).
TEST(BatchNorm, ReluFusedEqualsReluOfBatchNorm) {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
    for (const auto& sizes : kShapes) {
      for (bool training : {true, false}) {
        for (bool affine : {true, false}) {
          SCOPED_TRACE(::testing::Message() << dtype << " sizes " << ::testing::PrintToString(sizes) << " training "
                                            << training << " affine " << affine);
          const DType stats = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
          const Tensor x = channel_input(sizes, dtype, 50);
          const Tensor w = affine ? random_nonzero({3}, stats, 51) : Tensor();
          const Tensor b = affine ? random_nonzero({3}, stats, 52) : Tensor();
          const Tensor upstream = random_nonzero(sizes, dtype, 53);
          struct Run {
            Tensor y{}, running_mean{}, running_var{}, grad_x{}, grad_w{}, grad_b{};
          };
          const auto run = [&](bool fused) {
            Run r;
            r.running_mean = random_uniform({3}, -1, 1, stats, 54);
            r.running_var = random_uniform({3}, 0.5, 2, stats, 55);
            const Tensor xi = x.detach().requires_grad_(true);
            const Tensor wi = affine ? w.detach().requires_grad_(true) : Tensor();
            const Tensor bi = affine ? b.detach().requires_grad_(true) : Tensor();
            r.y = fused ? batch_norm_relu(xi, r.running_mean, r.running_var, wi, bi, training)
                        : relu(batch_norm(xi, r.running_mean, r.running_var, wi, bi, training));
            r.y.backward(upstream);
            r.grad_x = xi.grad();
            if (affine) {
              r.grad_w = wi.grad();
              r.grad_b = bi.grad();
            }
            return r;
          };
          const Run fused = run(true), unfused = run(false);
          EXPECT_GT(eq(unfused.y, 0.0).sum().item<int64_t>(), 0);  // the mask blocks some values
          EXPECT_TRUE(testing::all_equal(fused.y, unfused.y));
          EXPECT_TRUE(testing::all_equal(fused.running_mean, unfused.running_mean));
          EXPECT_TRUE(testing::all_equal(fused.running_var, unfused.running_var));
          EXPECT_TRUE(testing::all_equal(fused.grad_x, unfused.grad_x));
          if (affine) {
            EXPECT_TRUE(testing::all_equal(fused.grad_w, unfused.grad_w));
            EXPECT_TRUE(testing::all_equal(fused.grad_b, unfused.grad_b));
          }
        }
      }
    }
  }
}

// A NaN input stays NaN through the fused ReLU (as relu), and the gradients match
// relu(batch_norm(...))'s, NaN where they are NaN ((x - mean) times a zero coefficient).
TEST(BatchNorm, ReluFusedPropagatesNaNAsRelu) {
  for (bool training : {true, false}) {
    Tensor x = channel_input({4, 2, 3}, DType::Float64, 56);
    x.select(0, 1).select(0, 0).select(0, 2).fill_(std::nan(""));
    const Tensor mean = zeros({2}, {.dtype = DType::Float64}), var = ones({2}, {.dtype = DType::Float64});
    const Tensor upstream = random_nonzero(x.sizes(), DType::Float64, 57);
    const Tensor fused_x = x.detach().requires_grad_(true), unfused_x = x.detach().requires_grad_(true);
    const Tensor fused = batch_norm_relu(fused_x, mean, var, Tensor(), Tensor(), training);
    const Tensor unfused = relu(batch_norm(unfused_x, mean, var, Tensor(), Tensor(), training));
    EXPECT_TRUE(std::isnan(fused.select(0, 1).select(0, 0).select(0, 2).item<double>()));
    EXPECT_TRUE(testing::all_equal(isnan(fused), isnan(unfused)));
    fused.backward(upstream);
    unfused.backward(upstream);
    const auto zero_nan = [](const Tensor& t) { return where(isnan(t), zeros_like(t), t); };
    EXPECT_TRUE(testing::all_equal(isnan(fused_x.grad()), isnan(unfused_x.grad()))) << "training " << training;
    EXPECT_TRUE(testing::all_equal(zero_nan(fused_x.grad()), zero_nan(unfused_x.grad()))) << "training " << training;
  }
}

using BatchNormFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, double,
                               double);

// Gradient checks of a batch_norm-like op (random values from `seed` on): training and
// eval, affine, and not affine on a non-contiguous input.
void check_batch_norm_gradients(BatchNormFn op, uint64_t seed) {
  for (const auto& sizes : std::vector<std::vector<int64_t>>{{5, 3}, {3, 3, 4}, {2, 3, 2, 3}, {2, 3, 2, 2, 2}}) {
    for (bool training : {true, false}) {
      const Tensor running_mean = random_uniform({3}, -1, 1, DType::Float64, seed);
      const Tensor running_var = random_uniform({3}, 0.5, 2, DType::Float64, seed + 1);
      EXPECT_TRUE(gradcheck(
          [&](const Inputs& v) { return op(v[0], running_mean, running_var, v[1], v[2], training, 0.1, 1e-3); },
          {leaf(sizes, seed + 2), leaf({3}, seed + 3), leaf({3}, seed + 4)}))
          << "affine, training " << training;
      const Tensor x =
          non_contiguous(random_uniform(sizes, -2, 2, DType::Float64, seed + 5)).detach().requires_grad_(true);
      EXPECT_TRUE(gradcheck(
          [&](const Inputs& v) { return op(v[0], running_mean, running_var, Tensor(), Tensor(), training, 0.1, 1e-5); },
          {x}))
          << "not affine, training " << training;
    }
  }
}

KILN_GRADCHECK_TEST(batch_norm) { check_batch_norm_gradients(batch_norm, 30); }

KILN_GRADCHECK_TEST(batch_norm_relu) { check_batch_norm_gradients(batch_norm_relu, 60); }

// The normalisation with given (eval-style) statistics: mean and invstd are constants.
KILN_GRADCHECK_TEST(batch_norm_normalize) {
  batch_norm_pieces::Normalization norm{.mean = random_uniform({3}, -1, 1, DType::Float64, 36),
                                        .invstd = random_uniform({3}, 0.5, 2, DType::Float64, 37),
                                        .count = 8,
                                        .training = false};
  EXPECT_TRUE(gradcheck(
      [&](const Inputs& v) { return batch_norm_pieces::batch_norm_normalize("test", v[0].contiguous(), v[1], v[2], norm); },
      {leaf({2, 3, 4}, 38), leaf({3}, 39), leaf({3}, 40)}));
}

}  // namespace
}  // namespace kiln
