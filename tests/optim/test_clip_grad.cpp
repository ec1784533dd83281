// Gradient clipping (optim/clip_grad.h) against a reference: every gradient concatenated
// into one float64 vector, its norm, PyTorch's coefficient min(1, max_norm / (norm +
// 1e-6)), and each gradient times it. Also: parameters without a gradient, dtype mixes,
// a non-contiguous gradient, non-finite norms, clip_grad_value_ and bad arguments.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "optim/clip_grad.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::random_uniform;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Parameters with gradients of the given dtypes (shapes from tiny to several CPU chunks)
// and one parameter without a gradient.
std::vector<Tensor> params_with_grads(const std::vector<DType>& dtypes, uint64_t seed) {
  const std::vector<std::vector<int64_t>> shapes = {{4, 3}, {70001}, {2, 2, 2}, {1}};
  std::vector<Tensor> params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const DType dtype = dtypes[i % dtypes.size()];
    Tensor p = zeros(shapes[i], {.dtype = dtype}).requires_grad_(true);
    p.set_grad(random_uniform(shapes[i], -1, 1, dtype, seed + i));
    params.push_back(p);
  }
  params.push_back(zeros({5}).requires_grad_(true));  // no gradient: skipped
  return params;
}

double reference_norm(const std::vector<Tensor>& params, double p) {
  double acc = 0;
  for (const Tensor& param : params) {
    if (!param.grad().defined()) continue;
    for (double x : param.grad().to_vector<double>()) acc = std::isinf(p) ? std::max(acc, std::abs(x)) : acc + std::pow(std::abs(x), p);
  }
  return std::isinf(p) ? acc : std::pow(acc, 1.0 / p);
}

void check_clip(const std::vector<DType>& dtypes, double norm_type, double max_norm_fraction) {
  SCOPED_TRACE(::testing::Message() << dtypes[0] << " (" << dtypes.size() << " dtypes) p=" << norm_type);
  const std::vector<Tensor> params = params_with_grads(dtypes, 7);
  const double norm = reference_norm(params, norm_type);
  const double max_norm = max_norm_fraction * norm;
  const double coef = std::min(1.0, max_norm / (norm + 1e-6));
  std::vector<Tensor> want;
  for (const Tensor& p : params) {
    if (p.grad().defined()) want.push_back(p.grad().to(DType::Float64).mul(scalar_tensor(coef, {.dtype = DType::Float64})));
  }
  const Tensor total = optim::clip_grad_norm_(params, max_norm, norm_type);
  const bool all_double = std::all_of(dtypes.begin(), dtypes.end(), [](DType d) { return d == DType::Float64; });
  EXPECT_EQ(total.dtype(), all_double ? DType::Float64 : DType::Float32);
  EXPECT_NEAR(total.item<double>(), norm, (all_double ? 1e-12 : 2e-6) * norm);
  // The coefficient has the total's precision: a float32 total scales float64 gradients
  // to float32 accuracy.
  for (size_t i = 0; i < want.size(); ++i) {
    const DType dtype = params[i].grad().dtype();
    const DType precision = dtype == DType::Float64 ? total.dtype() : dtype;
    EXPECT_TRUE(all_close(params[i].grad(), want[i], testing::tolerance_for(precision))) << i;
  }
  EXPECT_FALSE(params.back().grad().defined());
}

TEST(ClipGradNorm, ScalesEveryGradientByTheJointCoefficient) {
  for (double p : {2.0, 1.0, 3.0, kInf}) {
    check_clip({DType::Float32}, p, 0.25);
    check_clip({DType::Float64}, p, 0.5);
    check_clip({DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}, p, 0.1);
  }
}

TEST(ClipGradNorm, LeavesGradientsUnchangedBelowMaxNorm) {
  const std::vector<Tensor> params = params_with_grads({DType::Float32, DType::Float16}, 3);
  std::vector<Tensor> before;
  for (const Tensor& p : params) {
    if (p.grad().defined()) before.push_back(p.grad().clone());
  }
  const Tensor total = optim::clip_grad_norm_(params, 2 * reference_norm(params, 2));
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(all_equal(params[i].grad(), before[i])) << i;
  EXPECT_NEAR(total.item<double>(), reference_norm(params, 2), 2e-6 * total.item<double>());
}

TEST(ClipGradNorm, NonContiguousGradientsAreClippedToo) {
  Tensor a = zeros({3, 5}).requires_grad_(true), b = zeros({4}).requires_grad_(true);
  a.set_grad(random_uniform({5, 3}, -1, 1, DType::Float32, 1).t());
  b.set_grad(random_uniform({4}, -1, 1, DType::Float32, 2));
  ASSERT_FALSE(a.grad().is_contiguous());
  const Tensor want_a = a.grad().clone(), want_b = b.grad().clone();
  const double norm = reference_norm({a, b}, 2), coef = 0.5 / (norm + 1e-6);
  optim::clip_grad_norm_({a, b}, 0.5);
  EXPECT_TRUE(all_close(a.grad(), want_a.to(DType::Float64).mul(scalar_tensor(coef, {.dtype = DType::Float64}))));
  EXPECT_TRUE(all_close(b.grad(), want_b.to(DType::Float64).mul(scalar_tensor(coef, {.dtype = DType::Float64}))));
}

// Channels-last gradients (a converted model's weights) take the fused path as they are:
// the same result as row-major ones, and no layout conversion.
TEST(ClipGradNorm, ChannelsLastGradientsAreClippedWithoutAConversion) {
  const Tensor values = random_uniform({2, 3, 2, 3, 4}, -1, 1, DType::Float32, 3);
  Tensor a = zeros({2, 3, 2, 3, 4}).requires_grad_(true), b = zeros({2, 3, 2, 3, 4}).requires_grad_(true);
  a.set_grad(values.clone());
  b.set_grad(values.contiguous(MemoryFormat::ChannelsLast3d));
  const int64_t before = layout_conversions();
  optim::clip_grad_norm_({b}, 0.5);
  EXPECT_EQ(layout_conversions(), before);
  optim::clip_grad_norm_({a}, 0.5);
  EXPECT_TRUE(b.grad().is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_TRUE(all_close(b.grad(), a.grad()));
}

TEST(ClipGradNorm, NoGradientsGiveZero) {
  const Tensor total = optim::clip_grad_norm_({zeros({3}).requires_grad_(true)}, 1.0);
  EXPECT_EQ(total.dtype(), DType::Float32);
  EXPECT_EQ(total.item<double>(), 0.0);
  EXPECT_EQ(optim::clip_grad_norm_({}, 1.0).item<double>(), 0.0);
}

TEST(ClipGradNorm, NonFiniteNorm) {
  std::vector<Tensor> params = params_with_grads({DType::Float32}, 11);
  params[1].grad().narrow(0, 5, 1).fill_(kInf);
  EXPECT_KILN_ERROR(optim::clip_grad_norm_(params, 1.0, 2.0, /*error_if_nonfinite=*/true), "clip_grad_norm_",
                    "non-finite", "error_if_nonfinite");
  // Without the flag PyTorch clips anyway: coef = max_norm / inf = 0.
  const Tensor total = optim::clip_grad_norm_(params, 1.0);
  EXPECT_EQ(total.item<double>(), kInf);
  EXPECT_TRUE(all_equal(params[0].grad(), zeros({4, 3})));
  EXPECT_TRUE(std::isnan(params[1].grad().narrow(0, 5, 1).item<double>()));  // inf * 0
}

TEST(ClipGradNorm, RejectsBadNormType) {
  const std::vector<Tensor> params = params_with_grads({DType::Float32}, 1);
  EXPECT_KILN_ERROR(optim::clip_grad_norm_(params, 1.0, 0.0), "clip_grad_norm_", "norm_type");
}

TEST(ClipGradValue, ClampsEveryGradient) {
  const std::vector<Tensor> params = params_with_grads({DType::Float32, DType::Float64, DType::Float16}, 5);
  std::vector<Tensor> want;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    std::vector<double> values = p.grad().to_vector<double>();
    for (double& x : values) x = std::min(0.3, std::max(-0.3, x));
    want.push_back(tensor(values, p.grad().sizes(), {.dtype = DType::Float64}));
  }
  optim::clip_grad_value_(params, 0.3);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(all_close(params[i].grad(), want[i])) << i;
  EXPECT_FALSE(params.back().grad().defined());
  EXPECT_KILN_ERROR(optim::clip_grad_value_(params, -1.0), "clip_grad_value_", "non-negative");
}

}  // namespace
}  // namespace kiln
