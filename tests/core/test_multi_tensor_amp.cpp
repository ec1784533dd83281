// Multi-tensor scale/check, norm and GradScaler's scale update (core/ops/multi_tensor.h)
// on the CPU backend, and the op layer's validation of every multi-tensor op.
//
// References: scale = elementwise product in float64; norm = the p-norm of all values
// concatenated, computed in float64 here; the scale update = GradScaler's rule written as
// a plain state machine. The norm is also checked to give the same bits with one thread
// as with several (fixed chunking, fixed-order combine).
#include <omp.h>

#include <algorithm>
#include <cfloat>
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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const DType kDTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};

Tensor scalar1(float value) { return full({1}, value, {.dtype = DType::Float32}); }

// Sizes from tiny to several chunks of the CPU work list, with an empty one.
List mixed_list(const std::vector<DType>& dtypes, uint64_t seed) {
  const std::vector<std::vector<int64_t>> shapes = {{7}, {300, 700}, {0}, {3, 3, 3}, {65537}};
  List list;
  for (size_t i = 0; i < shapes.size(); ++i) {
    list.push_back(random_uniform(shapes[i], -2, 2, dtypes[i % dtypes.size()], seed + i));
  }
  return list;
}

// ---- multi_tensor_scale_ ------------------------------------------------------------------

TEST(MultiTensorScale, ScalesAndConvertsEveryDTypePair) {
  for (DType src_dtype : kDTypes) {
    for (DType dst_dtype : kDTypes) {
      SCOPED_TRACE(::testing::Message() << src_dtype << " -> " << dst_dtype);
      const List src = mixed_list({src_dtype}, 3);
      List dst;
      for (const Tensor& s : src) dst.push_back(full(s.sizes(), 123.0, {.dtype = dst_dtype}));
      const Tensor found_inf = scalar1(0);
      multi_tensor_scale_(src, dst, scalar1(0.375f), found_inf);
      for (size_t i = 0; i < src.size(); ++i) {
        const Tensor want = src[i].to(DType::Float64).mul(scalar_tensor(0.375, {.dtype = DType::Float64}));
        EXPECT_TRUE(all_close(dst[i], want)) << i;
      }
      EXPECT_EQ(found_inf.item<double>(), 0.0);
    }
  }
}

TEST(MultiTensorScale, InPlaceUnscaleAndUndefinedScaleCopies) {
  List grads = mixed_list({DType::Float16, DType::Float32}, 5);
  List want;
  for (const Tensor& g : grads) want.push_back(g.to(DType::Float64).mul(scalar_tensor(0.5, {.dtype = DType::Float64})));
  multi_tensor_scale_(grads, grads, scalar1(0.5f));  // GradScaler's unscale_: dst = src
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(all_close(grads[i], want[i])) << i;

  List copies;
  for (const Tensor& g : grads) copies.push_back(zeros(g.sizes(), {.dtype = DType::Float64}));
  multi_tensor_scale_(grads, copies);  // scale undefined = 1: an exact widening copy
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(all_equal(copies[i], grads[i].to(DType::Float64))) << i;
}

TEST(MultiTensorScale, FindsInfAndNaNAnywhereAndNeverClearsTheFlag) {
  for (DType dtype : kDTypes) {
    for (double bad : {kInf, -kInf, kNaN}) {
      SCOPED_TRACE(::testing::Message() << dtype << " " << bad);
      List src = mixed_list({dtype}, 9);
      src[4].narrow(0, 65536, 1).fill_(bad);  // the last element of the last chunk
      const Tensor found_inf = scalar1(0);
      multi_tensor_scale_(src, {}, Tensor(), found_inf);  // check only
      EXPECT_EQ(found_inf.item<double>(), 1.0);
    }
    const List finite = mixed_list({dtype}, 11);
    const Tensor flag = scalar1(1);
    multi_tensor_scale_(finite, {}, scalar1(2), flag);
    EXPECT_EQ(flag.item<double>(), 1.0) << "found_inf is only ever set, never cleared";
    const Tensor clear = scalar1(0);
    multi_tensor_scale_(finite, {}, Tensor(), clear);
    EXPECT_EQ(clear.item<double>(), 0.0);
  }
}

// ---- multi_tensor_norm --------------------------------------------------------------------

double reference_norm(const List& list, double p) {
  double acc = 0;
  for (const Tensor& t : list) {
    for (double x : t.to_vector<double>()) {
      if (std::isinf(p)) acc = std::isnan(x) || std::isnan(acc) ? kNaN : std::max(acc, std::abs(x));
      else acc += std::pow(std::abs(x), p);
    }
  }
  return std::isinf(p) ? acc : std::pow(acc, 1.0 / p);
}

TEST(MultiTensorNorm, MatchesTheNormOfTheConcatenationForEveryP) {
  const std::vector<std::vector<DType>> mixes = {{DType::Float32}, {DType::Float64}, {DType::Float16},
                                                 {DType::BFloat16},
                                                 {DType::Float32, DType::Float16, DType::Float64, DType::BFloat16}};
  for (const auto& mix : mixes) {
    const List list = mixed_list(mix, 21);
    const bool all_double = mix.size() == 1 && mix[0] == DType::Float64;
    for (double p : {1.0, 2.0, 3.0, 0.5, kInf}) {
      SCOPED_TRACE(::testing::Message() << mix[0] << " (" << mix.size() << " dtypes) p=" << p);
      const Tensor norm = multi_tensor_norm(list, p);
      EXPECT_EQ(norm.dtype(), all_double ? DType::Float64 : DType::Float32);
      EXPECT_EQ(norm.dim(), 0);
      const double want = reference_norm(list, p);
      EXPECT_NEAR(norm.item<double>(), want, (all_double ? 1e-12 : 2e-6) * want);
    }
  }
}

TEST(MultiTensorNorm, PropagatesInfAndNaN) {
  List list = mixed_list({DType::Float32}, 31);
  list[1].narrow(0, 299, 1).fill_(-kInf);
  for (double p : {1.0, 2.0, kInf}) EXPECT_EQ(multi_tensor_norm(list, p).item<double>(), kInf) << p;
  list[4].narrow(0, 3, 1).fill_(kNaN);
  for (double p : {1.0, 2.0, 3.0, kInf}) EXPECT_TRUE(std::isnan(multi_tensor_norm(list, p).item<double>())) << p;
}

TEST(MultiTensorNorm, EmptyListIsZeroOnTheCpu) {
  const Tensor none = multi_tensor_norm({});
  EXPECT_EQ(none.dtype(), DType::Float32);
  EXPECT_EQ(none.item<double>(), 0.0);
  const Tensor empties = multi_tensor_norm({zeros({0}, {.dtype = DType::Float64})}, kInf);
  EXPECT_EQ(empties.dtype(), DType::Float64);
  EXPECT_EQ(empties.item<double>(), 0.0);
}

TEST(MultiTensorNorm, SameBitsWithAnyThreadCount) {
  const List list = mixed_list({DType::Float32, DType::Float16}, 41);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Tensor serial = multi_tensor_norm(list, 2);
  omp_set_num_threads(std::max(threads, 3));
  const Tensor parallel = multi_tensor_norm(list, 2);
  omp_set_num_threads(threads);
  EXPECT_TRUE(all_equal(parallel, serial));
}

// ---- amp_update_scale_ --------------------------------------------------------------------

// GradScaler's rule, one step: returns the new (scale, tracker).
std::pair<float, int32_t> reference_update(float scale, int32_t tracker, bool found_inf, double growth,
                                           double backoff, int64_t interval, double min_scale) {
  if (found_inf) return {static_cast<float>(std::max(scale * backoff, min_scale)), 0};
  if (tracker + 1 < interval) return {scale, tracker + 1};
  const float grown = static_cast<float>(scale * growth);
  return {std::isfinite(grown) ? grown : scale, 0};
}

TEST(AmpUpdateScale, FollowsGrowthAndBackoffSequences) {
  const Tensor scale = scalar1(65536.0f);
  const Tensor tracker = zeros({1}, {.dtype = DType::Int32});
  float want_scale = 65536.0f;
  int32_t want_tracker = 0;
  const bool infs[] = {false, false, false, true, false, false, false, false, true, true, false, false, false};
  for (bool inf : infs) {
    amp_update_scale_(scale, tracker, scalar1(inf ? 1.0f : 0.0f), 2.0, 0.5, 3, 0.0);
    std::tie(want_scale, want_tracker) = reference_update(want_scale, want_tracker, inf, 2.0, 0.5, 3, 0.0);
    EXPECT_EQ(scale.item<double>(), want_scale);
    EXPECT_EQ(tracker.item<int64_t>(), want_tracker);
  }
}

TEST(AmpUpdateScale, NeverGrowsToInfinity) {
  const Tensor scale = scalar1(FLT_MAX / 1.5f);
  const Tensor tracker = zeros({1}, {.dtype = DType::Int32});
  amp_update_scale_(scale, tracker, scalar1(0), 2.0, 0.5, 1, 0.0);
  EXPECT_EQ(scale.item<double>(), static_cast<double>(FLT_MAX / 1.5f));
  EXPECT_EQ(tracker.item<int64_t>(), 0);
}

// Note [GradScaler min_scale]: a backoff stops at the floor and stays there; without one,
// float32 halves 2^-24 down to 0 after 126 more backoffs. Growth still works from the floor.
TEST(AmpUpdateScale, BackoffStopsAtMinScale) {
  const double kMin = 0x1p-24;
  Tensor scale = scalar1(0x1p-20f);
  const Tensor tracker = full({1}, 1, {.dtype = DType::Int32});
  float want_scale = 0x1p-20f;
  int32_t want_tracker = 1;
  for (int step = 0; step < 200; ++step) {
    amp_update_scale_(scale, tracker, scalar1(1), 2.0, 0.5, 3, kMin);
    std::tie(want_scale, want_tracker) = reference_update(want_scale, want_tracker, true, 2.0, 0.5, 3, kMin);
    ASSERT_EQ(scale.item<double>(), want_scale) << "step " << step;
  }
  EXPECT_EQ(scale.item<double>(), kMin);
  EXPECT_EQ(tracker.item<int64_t>(), 0);
  // A factor that lands between two floats below the floor also stops exactly at it.
  amp_update_scale_(scale, tracker, scalar1(1), 2.0, 0.3, 3, kMin);
  EXPECT_EQ(scale.item<double>(), kMin);
  for (int step = 0; step < 3; ++step) amp_update_scale_(scale, tracker, scalar1(0), 2.0, 0.5, 3, kMin);
  EXPECT_EQ(scale.item<double>(), 2 * kMin);
  // A scale already below the floor (a floor raised later) is lifted to it by a backoff.
  scale.fill_(0x1p-30);
  amp_update_scale_(scale, tracker, scalar1(1), 2.0, 0.5, 3, kMin);
  EXPECT_EQ(scale.item<double>(), kMin);
}

// ---- validation ---------------------------------------------------------------------------

TEST(MultiTensorValidation, ListsMustAgree) {
  const List p = {zeros({3}), zeros({4})};
  const List three = {zeros({3}), zeros({4}), zeros({2})};
  EXPECT_KILN_ERROR(sgd_step_(p, three, {}, {.lr = 1}), "sgd_step_", "grads has 3 tensors", "params has 2");
  EXPECT_KILN_ERROR(sgd_step_(p, {zeros({3}), zeros({5})}, {}, {.lr = 1}), "sgd_step_", "grads[1]", "[5]",
                    "params[1]");
  EXPECT_KILN_ERROR(sgd_step_(p, {zeros({3}), zeros({4}, {.dtype = DType::Float64})}, {}, {.lr = 1}),
                    "grads[1] has dtype float64");
  EXPECT_KILN_ERROR(sgd_step_({zeros({3}), zeros({4}, {.dtype = DType::Float64})}, p, {}, {.lr = 1}),
                    "params[1] has dtype float64", "group the tensors by dtype");
  EXPECT_KILN_ERROR(sgd_step_(p, p, p, {.lr = 1}), "momentum_buffers must be empty when momentum is 0");
  EXPECT_KILN_ERROR(sgd_step_(p, p, {}, {.lr = 1, .momentum = 0.9}), "momentum_buffers has 0 tensors");
  EXPECT_KILN_ERROR(adam_step_(p, p, p, p, p, {zeros({}), zeros({})}, {.lr = 1}),
                    "max_exp_avg_sqs must be empty when amsgrad is off");
  EXPECT_KILN_ERROR(rmsprop_step_(p, p, p, {}, p, {.lr = 1}), "grad_avgs must be empty when centered is off");
  EXPECT_KILN_ERROR(multi_tensor_scale_(p, {zeros({3})}), "multi_tensor_scale_", "dst has 1 tensors");
}

TEST(MultiTensorValidation, TensorsMustBeDenseFloatingAndDefined) {
  const Tensor strided = zeros({4, 12}).slice(1, 0, 12, 2);
  EXPECT_KILN_ERROR(sgd_step_({zeros({3}), strided}, {zeros({3}), zeros({4, 6})}, {}, {.lr = 1}), "params[1]",
                    "not dense");
  // A dense parameter of another layout is fine, with its gradient laid out alike.
  const Tensor transposed = zeros({4, 6}).t();
  EXPECT_NO_THROW(sgd_step_({transposed}, {zeros({4, 6}).t()}, {}, {.lr = 1}));
  EXPECT_KILN_ERROR(sgd_step_({transposed}, {zeros({6, 4})}, {}, {.lr = 1}), "grads[0]",
                    "is not laid out as params[0]");
  EXPECT_KILN_ERROR(multi_tensor_norm({zeros({2}), zeros({2}, {.dtype = DType::Int64})}), "multi_tensor_norm",
                    "tensors[1] has dtype int64", "floating point");
  EXPECT_KILN_ERROR(sgd_step_({zeros({3})}, {Tensor()}, {}, {.lr = 1}), "grads[0] is undefined");
  EXPECT_KILN_ERROR(multi_tensor_norm({zeros({2})}, 0), "p must be positive");
  EXPECT_KILN_ERROR(multi_tensor_norm({zeros({2})}, -1), "p must be positive");
}

TEST(MultiTensorValidation, StepsAndAmpTensorsHaveFixedShapes) {
  const List p = {zeros({3})};
  EXPECT_KILN_ERROR(adam_step_(p, p, p, p, {}, {zeros({1})}, {.lr = 1}), "steps[0]", "shape []");
  EXPECT_KILN_ERROR(adam_step_(p, p, p, p, {}, {}, {.lr = 1}), "steps has 0 tensors");
  EXPECT_KILN_ERROR(sgd_step_(p, p, {}, {.lr = 1}, {.inv_scale = zeros({}), .found_inf = Tensor()}),
                    "amp.inv_scale", "shape [1]");
  EXPECT_KILN_ERROR(sgd_step_(p, p, {}, {.lr = 1}, {.inv_scale = Tensor(), .found_inf = zeros({1}, {.dtype = DType::Float64})}),
                    "amp.found_inf");
  EXPECT_KILN_ERROR(increment_steps_({zeros({}, {.dtype = DType::Int64})}), "increment_steps_", "steps[0]");
  EXPECT_KILN_ERROR(amp_update_scale_(scalar1(1), zeros({1}), scalar1(0), 2, 0.5, 10, 0), "growth_tracker",
                    "int32");
  EXPECT_KILN_ERROR(
      amp_update_scale_(scalar1(1), zeros({1}, {.dtype = DType::Int32}), scalar1(0), 2, 0.5, 0, 0),
      "growth_interval must be at least 1");
  for (double bad :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_KILN_ERROR(
        amp_update_scale_(scalar1(1), zeros({1}, {.dtype = DType::Int32}), scalar1(0), 2, 0.5, 1, bad),
        "amp_update_scale_", "min_scale must be finite and >= 0");
  }
}

TEST(MultiTensorValidation, EmptyTensorsAreDroppedFromEveryList) {
  // An empty param's state entries are skipped with it, whatever they hold.
  List params = {zeros({0}), full({2}, 1.0)};
  List grads = {zeros({0}), full({2}, 1.0)};
  List bufs = {zeros({0}), zeros({2})};
  sgd_step_(params, grads, bufs, {.lr = 0.5, .momentum = 0.9, .first_step = true});
  EXPECT_TRUE(all_close(params[1], full({2}, 0.5)));
  EXPECT_TRUE(all_close(bufs[1], full({2}, 1.0)));
}

}  // namespace
}  // namespace kiln
