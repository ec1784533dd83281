// Reductions against naive reference loops: every op over several dim sets (first, last,
// middle, non-adjacent, all; keepdim or not), on contiguous, non-contiguous, permuted and
// expanded (stride 0) inputs, in every float dtype and the integer dtypes each op takes;
// long rows (the parallel paths and float32 accuracy), NaN propagation, empty tensors,
// error messages, the subgradients at ties and kinks, and a gradient check per op.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;
using testing::random_uniform;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const DType kFloatTypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16};

// ---- the naive reference ---------------------------------------------------------------------

// The values one output collects, in row-major order of the input.
using Fold = std::function<double(const std::vector<double>&)>;

// Reduces x over `dims` (empty: all) the obvious way: every input element is appended to
// the group of the output it maps to, then each group is folded. Result in float64.
Tensor reference_reduce(const Tensor& x, std::vector<int64_t> dims, bool keepdim, const Fold& fold) {
  const int64_t ndim = x.dim();
  std::vector<bool> reduced(ndim, dims.empty());
  for (int64_t d : dims) reduced[d < 0 ? d + ndim : d] = true;
  std::vector<int64_t> keep_shape, out_shape;
  for (int64_t d = 0; d < ndim; ++d) {
    keep_shape.push_back(reduced[d] ? 1 : x.size(d));
    if (!reduced[d] || keepdim) out_shape.push_back(keep_shape.back());
  }
  int64_t outputs = 1;
  for (int64_t s : keep_shape) outputs *= s;
  std::vector<std::vector<double>> groups(outputs);
  const std::vector<double> values = x.to_vector<double>();
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
    int64_t rest = i, out_index = 0, out_stride = 1;
    for (int64_t d = ndim - 1; d >= 0; --d) {
      const int64_t index = rest % x.size(d);
      rest /= x.size(d);
      if (!reduced[d]) out_index += index * out_stride;
      out_stride *= keep_shape[d];
    }
    groups[out_index].push_back(values[i]);
  }
  std::vector<double> out;
  for (const auto& group : groups) out.push_back(fold(group));
  return tensor(out, keep_shape).reshape(out_shape);
}

double fold_sum(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}
double fold_mean(const std::vector<double>& v) { return fold_sum(v) / static_cast<double>(v.size()); }
double fold_max(const std::vector<double>& v) {
  double m = -kInf;
  for (double e : v) m = std::isnan(e) || std::isnan(m) ? kNaN : std::max(m, e);
  return m;
}
double fold_min(const std::vector<double>& v) {
  double m = kInf;
  for (double e : v) m = std::isnan(e) || std::isnan(m) ? kNaN : std::min(m, e);
  return m;
}
double fold_argmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[best])) break;
    if (std::isnan(v[i]) || v[i] > v[best]) best = i;
  }
  return static_cast<double>(best);
}
double fold_argmin(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[best])) break;
    if (std::isnan(v[i]) || v[i] < v[best]) best = i;
  }
  return static_cast<double>(best);
}
Fold fold_var(int64_t correction) {
  return [correction](const std::vector<double>& v) {
    const double m = fold_mean(v);
    double ss = 0;
    for (double e : v) ss += (e - m) * (e - m);
    return ss / static_cast<double>(std::max<int64_t>(0, static_cast<int64_t>(v.size()) - correction));
  };
}
Fold fold_norm(double p) {
  return [p](const std::vector<double>& v) {
    if (std::isinf(p)) {
      double m = 0;
      for (double e : v) m = std::isnan(e) || std::isnan(m) ? kNaN : std::max(m, std::abs(e));
      return m;
    }
    double s = 0;
    for (double e : v) s += std::pow(std::abs(e), p);
    return std::pow(s, 1 / p);
  };
}
double fold_logsumexp(const std::vector<double>& v) {
  const double m = fold_max(v);
  double s = 0;
  for (double e : v) s += std::exp(e - m);
  return m + std::log(s);
}

// ---- inputs: one set of values in several layouts ------------------------------------------

// Dim sets over a 4-d input: first, last, middle, non-adjacent, negative, several, all.
const std::vector<std::vector<int64_t>> kDimSets = {{0}, {3}, {1}, {0, 2}, {1, 3}, {-1, 0}, {1, 2, 3}, {}};

struct Layout {
  std::string name;
  Tensor x;
};

// The same logical values (shape [3, 4, 5, 6]) laid out four ways.
std::vector<Layout> layouts(const Tensor& contiguous_x) {
  const Tensor permuted = contiguous_x.permute({2, 0, 3, 1}).contiguous().permute({1, 3, 0, 2});
  // Expanded: dim 1 has stride 0 (the values repeat along it).
  const Tensor expanded = contiguous_x.narrow(1, 0, 1).expand(contiguous_x.sizes());
  return {{"contiguous", contiguous_x},
          {"non_contiguous", non_contiguous(contiguous_x)},
          {"permuted", permuted},
          {"expanded", expanded}};
}

struct OpCase {
  const char* name;
  std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)> op;
  Fold fold;
};

std::vector<OpCase> float_cases() {
  return {
      {"sum", [](const Tensor& x, auto d, bool k) { return sum(x, d, k); }, fold_sum},
      {"mean", [](const Tensor& x, auto d, bool k) { return mean(x, d, k); }, fold_mean},
      {"amax", [](const Tensor& x, auto d, bool k) { return amax(x, d, k); }, fold_max},
      {"amin", [](const Tensor& x, auto d, bool k) { return amin(x, d, k); }, fold_min},
      {"var", [](const Tensor& x, auto d, bool k) { return var(x, d, 1, k); }, fold_var(1)},
      {"var_c0", [](const Tensor& x, auto d, bool k) { return var(x, d, 0, k); }, fold_var(0)},
      {"std", [](const Tensor& x, auto d, bool k) { return kiln::std(x, d, 1, k); },
       [](const std::vector<double>& v) { return std::sqrt(fold_var(1)(v)); }},
      {"var_mean.mean", [](const Tensor& x, auto d, bool k) { return std::get<1>(var_mean(x, d, 1, k)); }, fold_mean},
      {"norm2", [](const Tensor& x, auto d, bool k) { return norm(x, 2.0, d, k); }, fold_norm(2)},
      {"norm1", [](const Tensor& x, auto d, bool k) { return norm(x, 1.0, d, k); }, fold_norm(1)},
      {"norm3", [](const Tensor& x, auto d, bool k) { return norm(x, 3.0, d, k); }, fold_norm(3)},
      {"norm0.5", [](const Tensor& x, auto d, bool k) { return norm(x, 0.5, d, k); }, fold_norm(0.5)},
      {"norm_inf", [](const Tensor& x, auto d, bool k) { return norm(x, INFINITY, d, k); }, fold_norm(kInf)},
      {"logsumexp", [](const Tensor& x, auto d, bool k) { return logsumexp(x, d, k); }, fold_logsumexp},
  };
}

// The reference runs on the input's own (already rounded) values and rounds its result to
// the input's dtype, so half types are judged on the reduction, not on input rounding.
TEST(Reduce, FloatOpsMatchReferenceOverDimSetsLayoutsAndDtypes) {
  for (DType dtype : kFloatTypes) {
    const Tensor base = random_nonzero({3, 4, 5, 6}, dtype, 11);
    for (const Layout& layout : layouts(base)) {
      for (const OpCase& c : float_cases()) {
        for (const auto& dims : kDimSets) {
          for (bool keepdim : {false, true}) {
            SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dtype)) + " " + layout.name + " dims " +
                         shape_str(dims) + (keepdim ? " keepdim" : ""));
            const Tensor got = c.op(layout.x, dims, keepdim);
            ASSERT_EQ(got.dtype(), dtype);
            const Tensor expected = reference_reduce(layout.x, dims, keepdim, c.fold).to(dtype);
            ASSERT_TRUE(all_close(got, expected));
          }
        }
      }
    }
  }
}

TEST(Reduce, VarMeanGivesVarAndMeanOfOnePass) {
  const Tensor x = random_uniform({6, 7}, -3, 3, DType::Float64, 4);
  const auto [v, m] = var_mean(x, {1}, 1, true);
  EXPECT_TRUE(all_close(v, reference_reduce(x, {1}, true, fold_var(1))));
  EXPECT_TRUE(all_close(m, reference_reduce(x, {1}, true, fold_mean)));
  // Welford is not fooled by a large common offset (E[x^2] - E[x]^2 would be).
  const Tensor shifted = add(x, 1e8);
  EXPECT_TRUE(all_close(var(shifted, {1}), var(x, {1}), {1e-6, 1e-6}));
}

TEST(Reduce, SumOfIntegersAndBoolGivesInt64) {
  for (DType dtype : {DType::Int64, DType::Int32, DType::UInt8, DType::Bool}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor x = random_uniform({3, 4, 5, 6}, 0, dtype == DType::Bool ? 2 : 100, DType::Float64, 5).to(dtype);
    for (const Layout& layout : layouts(x)) {
      for (const auto& dims : kDimSets) {
        const Tensor got = sum(layout.x, dims, false);
        ASSERT_TRUE(all_equal(got, reference_reduce(layout.x, dims, false, fold_sum).to(DType::Int64)))
            << layout.name << " dims " << shape_str(dims);
      }
    }
  }
  // 300 uint8 values of 255 do not wrap.
  EXPECT_EQ(sum(full({300}, 255, {.dtype = DType::UInt8})).item<int64_t>(), 300 * 255);
}

TEST(Reduce, IntegerExtremaAndArgExtremaAreExact) {
  for (DType dtype : {DType::Int64, DType::Int32, DType::UInt8}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor x = random_uniform({3, 4, 5, 6}, 0, 50, DType::Float64, 6).to(dtype);
    for (const Layout& layout : layouts(x)) {
      for (const auto& dims : kDimSets) {
        EXPECT_TRUE(all_equal(amax(layout.x, dims), reference_reduce(layout.x, dims, false, fold_max).to(dtype)));
        EXPECT_TRUE(all_equal(amin(layout.x, dims), reference_reduce(layout.x, dims, false, fold_min).to(dtype)));
      }
      for (int64_t dim = 0; dim < 4; ++dim) {
        // Small integers tie often: the first index must win.
        EXPECT_TRUE(all_equal(argmax(layout.x, dim), reference_reduce(layout.x, {dim}, false, fold_argmax).to(DType::Int64)));
        EXPECT_TRUE(all_equal(argmin(layout.x, dim), reference_reduce(layout.x, {dim}, false, fold_argmin).to(DType::Int64)));
      }
    }
  }
}

TEST(Reduce, BoolExtremaAndIndices) {
  const Tensor b = tensor<bool>({false, true, true, false}, {2, 2});
  EXPECT_TRUE(all_equal(amax(b, {1}), tensor<bool>({true, true})));
  EXPECT_TRUE(all_equal(amin(b, {0}), tensor<bool>({false, false})));
  const auto [values, indices] = max(b, 1);
  EXPECT_TRUE(all_equal(values, tensor<bool>({true, true})));
  EXPECT_TRUE(all_equal(indices, tensor<int64_t>({1, 0})));
}

TEST(Reduce, MaxMinWithDimGiveValuesAndFirstIndices) {
  for (DType dtype : kFloatTypes) {
    const Tensor base = random_nonzero({3, 4, 5, 6}, dtype, 12);
    for (const Layout& layout : layouts(base)) {
      for (int64_t dim : {0, 1, 2, 3, -1}) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + layout.name + " dim " + std::to_string(dim));
          const auto [values, indices] = max(layout.x, dim, keepdim);
          EXPECT_TRUE(all_equal(values, reference_reduce(layout.x, {dim}, keepdim, fold_max).to(dtype)));
          EXPECT_TRUE(all_equal(indices, reference_reduce(layout.x, {dim}, keepdim, fold_argmax).to(DType::Int64)));
          const auto [min_values, min_indices] = min(layout.x, dim, keepdim);
          EXPECT_TRUE(all_equal(min_values, reference_reduce(layout.x, {dim}, keepdim, fold_min).to(dtype)));
          EXPECT_TRUE(all_equal(min_indices, reference_reduce(layout.x, {dim}, keepdim, fold_argmin).to(DType::Int64)));
          EXPECT_TRUE(all_equal(argmax(layout.x, dim, keepdim), indices));
          EXPECT_TRUE(all_equal(argmin(layout.x, dim, keepdim), min_indices));
        }
      }
    }
  }
}

TEST(Reduce, ArgmaxWithoutDimIndexesTheFlattenedTensor) {
  const Tensor x = tensor<double>({1, 5, 2, 5, -7, 0}, {2, 3});
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);  // first of the tied 5s
  EXPECT_EQ(argmin(x).item<int64_t>(), 4);
  EXPECT_EQ(argmax(x).dim(), 0);
  EXPECT_EQ(argmax(x, std::nullopt, true).sizes(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(argmax(x.t()).item<int64_t>(), 1);  // x.t() flattened is 1 5 | 5 -7 | 2 0
  EXPECT_EQ(argmin(x.t()).item<int64_t>(), 3);
  EXPECT_TRUE(all_equal(max(x), scalar_tensor(5.0, {.dtype = DType::Float64})));
  EXPECT_TRUE(all_equal(min(x), scalar_tensor(-7.0, {.dtype = DType::Float64})));
}

TEST(Reduce, ZeroDimTensors) {
  const Tensor s = scalar_tensor(2.5, {.dtype = DType::Float64});
  EXPECT_DOUBLE_EQ(sum(s).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(sum(s, {0}).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(amax(s, {-1}, true).item<double>(), 2.5);
  EXPECT_EQ(sum(s, {0}, true).dim(), 0);
  const auto [v, i] = max(s, 0);
  EXPECT_EQ(v.dim(), 0);
  EXPECT_DOUBLE_EQ(v.item<double>(), 2.5);
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_EQ(argmax(s).item<int64_t>(), 0);
  EXPECT_TRUE(std::isnan(var(s).item<double>()));  // one element, correction 1: 0 / 0
  EXPECT_DOUBLE_EQ(var(s, {}, 0).item<double>(), 0.0);
  EXPECT_DOUBLE_EQ(logsumexp(s, {}).item<double>(), 2.5);
  Tensor leaf = s.detach().requires_grad_(true);
  std::get<0>(max(leaf, -1, true)).backward();
  EXPECT_EQ(leaf.grad().dim(), 0);
  EXPECT_DOUBLE_EQ(leaf.grad().item<double>(), 1.0);
}

// RAII: more OpenMP threads than this machine may have, so the split-reduction path runs.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(Reduce, LongReductionsAreAccurateOnEveryParallelPath) {
  for (int threads : {1, 4}) {
    ThreadCount guard(threads);
    SCOPED_TRACE("threads " + std::to_string(threads));
    // float32: 1e6 x 0.1f in a float accumulator drifts by ~1e-3 relative; double keeps 1e-6.
    const Tensor tenths = full({1000000}, 0.1f, {.dtype = DType::Float32});
    const double exact = 1e6 * static_cast<double>(0.1f);
    EXPECT_NEAR(sum(tenths).item<double>(), exact, 1e-6 * exact);
    EXPECT_NEAR(mean(tenths).item<double>(), 0.1f, 1e-6 * 0.1);
    EXPECT_NEAR(sum(tenths.view({1000, 1000}), {0}).sum().item<double>(), exact, 1e-6 * exact);

    const Tensor row = random_nonzero({100000}, DType::Float32, 3);
    EXPECT_TRUE(all_close(sum(row), reference_reduce(row, {}, false, fold_sum).to(DType::Float32)));
    EXPECT_TRUE(all_close(var(row), reference_reduce(row, {}, false, fold_var(1)).to(DType::Float32)));
    EXPECT_TRUE(all_close(norm(row), reference_reduce(row, {}, false, fold_norm(2)).to(DType::Float32)));
    EXPECT_TRUE(all_equal(amax(row), reference_reduce(row, {}, false, fold_max).to(DType::Float32)));
    EXPECT_TRUE(all_equal(argmin(row), reference_reduce(row, {}, false, fold_argmin).to(DType::Int64)));

    // Long rows full of ties: the first index must survive the lanes and the thread split.
    const Tensor ties = random_uniform({3, 70000}, 0, 4, DType::Float64, 9).to(DType::Int32);
    for (const Tensor& x : {ties, ties.t().contiguous().t()}) {
      EXPECT_TRUE(all_equal(argmax(x, 1), reference_reduce(x, {1}, false, fold_argmax).to(DType::Int64)));
      EXPECT_TRUE(all_equal(argmin(x, 1), reference_reduce(x, {1}, false, fold_argmin).to(DType::Int64)));
      EXPECT_TRUE(all_equal(argmax(x.narrow(0, 0, 1)), reference_reduce(x.narrow(0, 0, 1), {}, false, fold_argmax).to(DType::Int64)));
    }

    // Inner (rows) and outer (columns) loop orders over long reductions, few outputs.
    const Tensor m = random_nonzero({2, 100000}, DType::Float64, 8);
    for (const Tensor& x : {m, m.t(), non_contiguous(m.t().contiguous())}) {
      for (int64_t dim : {0, 1}) {
        EXPECT_TRUE(all_close(sum(x, {dim}), reference_reduce(x, {dim}, false, fold_sum)));
        EXPECT_TRUE(all_close(var(x, {dim}), reference_reduce(x, {dim}, false, fold_var(1))));
        EXPECT_TRUE(all_equal(argmax(x, dim), reference_reduce(x, {dim}, false, fold_argmax).to(DType::Int64)));
        EXPECT_TRUE(all_equal(amin(x, {dim}), reference_reduce(x, {dim}, false, fold_min)));
      }
    }
  }
}

TEST(Reduce, MaxMinAndNormInfPropagateNaN) {
  // A NaN early, in the middle of a long row (the lane path) and in a column (outer path).
  std::vector<double> values(100, 1.0);
  values[3] = kNaN;
  values[57] = kNaN;
  values[80] = 9.0;
  const Tensor row = tensor(values);
  EXPECT_TRUE(std::isnan(amax(row).item<double>()));
  EXPECT_TRUE(std::isnan(amin(row).item<double>()));
  EXPECT_TRUE(std::isnan(max(row).item<double>()));
  EXPECT_TRUE(std::isnan(norm(row, INFINITY).item<double>()));
  EXPECT_TRUE(std::isnan(sum(row).item<double>()));
  EXPECT_EQ(argmax(row).item<int64_t>(), 3);  // NaN is the extremum; the first one wins
  EXPECT_EQ(argmin(row).item<int64_t>(), 3);
  const auto [v, i] = max(row.view({4, 25}).t(), 1);  // columns of the [4, 25] view
  EXPECT_TRUE(std::isnan(v.to_vector<double>()[3]));
  EXPECT_EQ(i.to_vector<int64_t>()[3], 0);    // column 3 holds index 3 at row 0
  EXPECT_EQ(i.to_vector<int64_t>()[7], 2);    // column 7 holds index 57 at row 2
  const Tensor columns = amax(row.view({4, 25}), {0});
  EXPECT_TRUE(std::isnan(columns.to_vector<double>()[3]));
  EXPECT_TRUE(std::isnan(columns.to_vector<double>()[7]));
  EXPECT_DOUBLE_EQ(columns.to_vector<double>()[5], 9.0);  // index 80 is row 3, column 5
  EXPECT_TRUE(std::isnan(amax(tensor<double>({kNaN, 1}).to(DType::Float32)).item<float>()));
  EXPECT_TRUE(std::isnan(amax(tensor<double>({1, kNaN}).to(DType::Float16)).item<float>()));
}

TEST(Reduce, InfinitiesAreOrdinaryValues) {
  const Tensor x = tensor<double>({-kInf, -kInf});
  EXPECT_EQ(amax(x).item<double>(), -kInf);
  EXPECT_EQ(argmax(x).item<int64_t>(), 0);
  EXPECT_EQ(amin(tensor<double>({3, kInf})).item<double>(), 3.0);
  EXPECT_EQ(logsumexp(x, {0}).item<double>(), -kInf);  // shift 0 where the max is -inf
  EXPECT_EQ(logsumexp(tensor<double>({1, kInf}), {0}).item<double>(), kInf);
  // A large shift: no overflow.
  EXPECT_NEAR(logsumexp(tensor<double>({1000, 1000}), {0}).item<double>(), 1000 + std::log(2.0), 1e-12);
  EXPECT_NEAR(logsumexp(tensor<float>({-1000, -1000}), {0}).item<float>(), -1000 + std::log(2.0), 1e-3);
}

TEST(Reduce, EmptyReductionsGiveIdentitiesOrErrors) {
  const Tensor e = zeros({0, 3});
  EXPECT_TRUE(all_equal(sum(e, {0}), zeros({3})));
  EXPECT_TRUE(all_equal(sum(e), scalar_tensor(0.f)));
  EXPECT_TRUE(all_equal(sum(zeros({0}, {.dtype = DType::Int32})), scalar_tensor(int64_t{0})));
  EXPECT_EQ(sum(e, {1}).sizes(), (std::vector<int64_t>{0}));
  EXPECT_TRUE(std::isnan(mean(e).item<float>()));
  EXPECT_TRUE(std::isnan(var(e).item<float>()));
  EXPECT_TRUE(std::isnan(std::get<1>(var_mean(e, {0})).to_vector<float>()[1]));
  EXPECT_EQ(norm(e).item<float>(), 0.f);
  EXPECT_EQ(logsumexp(e, {0}).to_vector<float>()[0], -INFINITY);
  EXPECT_EQ(amax(e, {1}).sizes(), (std::vector<int64_t>{0}));  // reduces a non-empty dim
  EXPECT_TRUE(all(e).item<bool>());
  EXPECT_FALSE(any(e).item<bool>());
  EXPECT_KILN_ERROR(amax(e, {0}), "amax", "dim 0 of size 0", "[0, 3]", "no maximum");
  EXPECT_KILN_ERROR(amin(e), "amin", "size 0", "no minimum");
  EXPECT_KILN_ERROR(max(e), "max", "size 0");
  EXPECT_KILN_ERROR(max(e, 0), "max", "dim 0 of size 0");
  EXPECT_KILN_ERROR(argmax(e), "argmax", "empty", "[0, 3]");
  EXPECT_KILN_ERROR(argmin(e, 0), "argmin", "dim 0 of size 0");
  EXPECT_KILN_ERROR(norm(e, INFINITY), "norm", "size 0");
}

TEST(Reduce, VarWithTooLargeCorrectionIsInfOrNaN) {
  const Tensor x = tensor<double>({1.0, 2.0});
  EXPECT_EQ(var(x, {}, 2).item<double>(), kInf);  // M2 = 0.5 over max(0, 2 - 2) = 0
  EXPECT_EQ(var(x, {}, 3).item<double>(), kInf);
  EXPECT_TRUE(std::isnan(var(tensor<double>({4.0}), {}, 1).item<double>()));  // 0 / 0
  EXPECT_DOUBLE_EQ(var(x, {}, 0).item<double>(), 0.25);
}

TEST(Reduce, AllAndAnyTakeAnyDtype) {
  EXPECT_TRUE(all(tensor<double>({1, -2, kNaN})).item<bool>());  // NaN is nonzero
  EXPECT_FALSE(all(tensor<double>({1, 0, 3})).item<bool>());
  EXPECT_TRUE(any(tensor<double>({0, 0, -0.5})).item<bool>());
  EXPECT_FALSE(any(zeros({4, 5}, {.dtype = DType::Int32})).item<bool>());
  EXPECT_TRUE(all(ones({3, 1000}, {.dtype = DType::UInt8}).t()).item<bool>());
  EXPECT_FALSE(all(tensor<bool>({true, false})).item<bool>());
  EXPECT_TRUE(any(tensor<bool>({false, true})).item<bool>());
  EXPECT_EQ(all(tensor<int64_t>({1, 2})).dtype(), DType::Bool);
  EXPECT_EQ(any(tensor<int64_t>({1, 2})).dim(), 0);
}

TEST(Reduce, LogsumexpOfIntegersIsFloat32) {
  const Tensor x = tensor<int64_t>({1, 2, 3});
  const Tensor got = logsumexp(x, {0});
  EXPECT_EQ(got.dtype(), DType::Float32);
  EXPECT_NEAR(got.item<double>(), std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-5);
}

TEST(Reduce, ErrorMessagesNameTheOpAndTheArgument) {
  const Tensor x = zeros({2, 3});
  EXPECT_KILN_ERROR(sum(x, {2}), "sum", "dimension 2 out of range", "2-d");
  EXPECT_KILN_ERROR(mean(x, {-3}), "mean", "dimension -3 out of range");
  EXPECT_KILN_ERROR(amax(x, {1, -1}), "amax", "dim 1 appears more than once", "[1, -1]");
  EXPECT_KILN_ERROR(sum(x, {0, 0}), "sum", "more than once");
  EXPECT_KILN_ERROR(max(x, 5), "max", "dimension 5 out of range");
  EXPECT_KILN_ERROR(argmax(x, -4), "argmax", "out of range");
  const Tensor i = zeros({2, 3}, {.dtype = DType::Int64});
  EXPECT_KILN_ERROR(mean(i), "mean", "floating-point", "int64", "Hint");
  EXPECT_KILN_ERROR(var(i), "var", "floating-point", "int64");
  EXPECT_KILN_ERROR(kiln::std(i), "std", "floating-point");
  EXPECT_KILN_ERROR(var_mean(i), "var_mean", "floating-point");
  EXPECT_KILN_ERROR(norm(i), "norm", "floating-point");
  EXPECT_KILN_ERROR(norm(x, 0.0), "norm", "p must be positive", "0");
  EXPECT_KILN_ERROR(norm(x, -2.0), "norm", "p must be positive");
  EXPECT_KILN_ERROR(norm(x, NAN), "norm", "p must be positive");
  EXPECT_KILN_ERROR(sum(Tensor()), "sum", "undefined");
}

// ---- subgradients at ties and kinks (documented in reduce.cpp) -------------------------------

TEST(Reduce, AmaxAndMaxSplitTheGradientAmongTies) {
  Tensor x = tensor<double>({1, 3, 3, 2}, {2, 2}).requires_grad_(true);
  amax(x).backward();  // two tied maxima: half each
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({0, 0.5, 0.5, 0}, {2, 2})));
  x.set_grad(Tensor());
  amin(x, {1}).sum().backward();  // row minima 1 and 2, no ties
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({1, 0, 0, 1}, {2, 2})));
  x.set_grad(Tensor());
  max(x).backward();
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({0, 0.5, 0.5, 0}, {2, 2})));
}

TEST(Reduce, MaxWithDimGivesTheGradientToTheReturnedIndex) {
  Tensor x = tensor<double>({3, 1, 3, 2, 2, 5}, {2, 3}).requires_grad_(true);
  std::get<0>(max(x, 1)).backward(tensor<double>({10, 20}));
  // Row 0 ties at 0 and 2: index 0 is returned and takes it all.
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({10, 0, 0, 0, 0, 20}, {2, 3})));
  x.set_grad(Tensor());
  std::get<0>(min(x, 0, true)).sum().backward();  // column minima: 2 (row 1), 1, 3 (row 0, tie)
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({0, 1, 1, 1, 0, 0}, {2, 3})));
  EXPECT_FALSE(std::get<1>(max(x, 1)).requires_grad());
  EXPECT_FALSE(argmax(x).requires_grad());
}

TEST(Reduce, NormAndStdGradientsAtKinks) {
  // p = 1: sign(0) = 0 at a zero element.
  Tensor x = tensor<double>({0, 2, -3}).requires_grad_(true);
  norm(x, 1.0).backward();
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({0, 1, -1})));
  // p = 2 and 3 of the zero vector: 0, not NaN.
  for (double p : {2.0, 3.0}) {
    Tensor z = zeros({3}, {.dtype = DType::Float64}).requires_grad_(true);
    norm(z, p).backward();
    EXPECT_TRUE(all_equal(z.grad(), zeros({3}, {.dtype = DType::Float64})));
  }
  // p = inf: split among the tied |x| maxima, with their signs.
  Tensor t = tensor<double>({-3, 1, 3}).requires_grad_(true);
  norm(t, INFINITY).backward();
  EXPECT_TRUE(all_close(t.grad(), tensor<double>({-0.5, 0, 0.5})));
  // std of a constant: 0, not NaN.
  Tensor c = full({4}, 2.0, {.dtype = DType::Float64}).requires_grad_(true);
  kiln::std(c).backward();
  EXPECT_TRUE(all_equal(c.grad(), zeros({4}, {.dtype = DType::Float64})));
}

// ---- gradient checks ------------------------------------------------------------------------

using Inputs = std::vector<Tensor>;

// Values spread over [-2, 2] (ties have probability zero), as a float64 leaf.
Tensor leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return random_uniform(sizes, -2, 2, DType::Float64, seed).requires_grad_(true);
}

// A non-contiguous float64 leaf (every other element of a buffer).
Tensor strided_leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return non_contiguous(random_uniform(sizes, -2, 2, DType::Float64, seed)).detach().requires_grad_(true);
}

KILN_GRADCHECK_TEST(sum) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return sum(v[0]); }, {leaf({3, 4}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return sum(v[0], {0, 2}, true); }, {strided_leaf({2, 3, 4}, 2)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return sum(v[0], {-1}); }, {leaf({2, 3}, 3)}));
}

KILN_GRADCHECK_TEST(mean) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mean(v[0], {1}); }, {strided_leaf({3, 4, 2}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mean(v[0]); }, {leaf({5}, 2)}));
}

KILN_GRADCHECK_TEST(amax) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return amax(v[0], {1}); }, {strided_leaf({3, 4, 2}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return amax(v[0], {0, 2}, true); }, {leaf({3, 4, 2}, 2)}));
}

KILN_GRADCHECK_TEST(amin) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return amin(v[0], {-1}); }, {strided_leaf({3, 4}, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return amin(v[0]); }, {leaf({3, 4}, 4)}));
}

KILN_GRADCHECK_TEST(max) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return max(v[0]); }, {strided_leaf({3, 4}, 5)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return std::get<0>(max(v[0], 1)); }, {leaf({3, 4, 2}, 6)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return std::get<0>(max(v[0], 0, true)); }, {strided_leaf({3, 4}, 7)}));
}

KILN_GRADCHECK_TEST(min) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return min(v[0]); }, {leaf({3, 4}, 8)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return std::get<0>(min(v[0], -1)); }, {strided_leaf({3, 4}, 9)}));
}

KILN_GRADCHECK_TEST(var) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return var(v[0], {1}); }, {strided_leaf({3, 4, 2}, 1)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return var(v[0], {}, 0, true); }, {leaf({3, 4}, 2)}));
}

KILN_GRADCHECK_TEST(std) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return kiln::std(v[0], {0}); }, {strided_leaf({4, 3}, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return kiln::std(v[0], {0, 2}, 0, true); }, {leaf({3, 2, 4}, 4)}));
}

KILN_GRADCHECK_TEST(var_mean) {
  // Both outputs at once: var + 2 mean.
  auto both = [](const Inputs& v) {
    const auto [var_out, mean_out] = var_mean(v[0], {1});
    return add(var_out, mul(mean_out, 2.0));
  };
  EXPECT_TRUE(gradcheck(both, {strided_leaf({3, 5}, 5)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return std::get<1>(var_mean(v[0], {}, 0)); }, {leaf({2, 3}, 6)}));
}

KILN_GRADCHECK_TEST(norm) {
  for (double p : {1.0, 2.0, 3.0, 0.5, kInf}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    EXPECT_TRUE(gradcheck([p](const Inputs& v) { return norm(v[0], p); }, {leaf({3, 4}, 7)}));
    EXPECT_TRUE(gradcheck([p](const Inputs& v) { return norm(v[0], p, {1}, true); }, {strided_leaf({3, 4}, 8)}));
  }
}

KILN_GRADCHECK_TEST(logsumexp) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return logsumexp(v[0], {1}); }, {strided_leaf({3, 4}, 9)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return logsumexp(v[0], {0, 2}, true); }, {leaf({2, 3, 2}, 10)}));
}

// An empty input can have a huge output: a spec-valid safetensors tensor of shape
// [0, 2^62] once loaded and then segfaulted in .sum({0}), whose [2^62] float32 output
// wrapped to 0 bytes. The output's size is now checked when it is allocated.
TEST(Reduce, HugeOutputsOfEmptyInputsAreErrorsNotWrappedAllocations) {
  const int64_t big = int64_t{1} << 62;
  EXPECT_KILN_ERROR(zeros({0, big}).sum({0}), "4611686018427387904 elements of float32 are more than 2^63 - 1 bytes");
  EXPECT_KILN_ERROR(zeros({0, big}).mean({0}), "more than 2^63 - 1 bytes");
  EXPECT_KILN_ERROR(zeros({0, int64_t{1} << 50}).sum({0}), "out of memory");
  const Tensor sums = zeros({0, 5}).sum({0});
  EXPECT_TRUE(all_equal(sums, zeros({5})));
  EXPECT_EQ(zeros({0, big}).sum().item<float>(), 0.0f);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A reduction's plan has no rank limit of its own: a 70-d tensor (size-1 dims around a few
// real ones) sums as its 3-d squeeze does, and an empty one gives its empty result.
TEST(Reduce, TensorsOfManyDimsReduceAsTheirSqueezedShapes) {
  std::vector<int64_t> sizes(70, 1);
  sizes[3] = 2;
  sizes[40] = 3;
  sizes[69] = 4;
  const Tensor x = testing::random_nonzero({2, 3, 4}, DType::Float64, 7);
  const Tensor many = x.reshape(sizes);
  EXPECT_TRUE(testing::all_close(sum(many).reshape({}), sum(x)));
  EXPECT_TRUE(testing::all_close(sum(many, {40, 69}).reshape({2}), sum(x, {1, 2})));
  sizes[5] = 0;
  EXPECT_EQ(sum(zeros(sizes), {3}).numel(), 0);
}

}  // namespace
}  // namespace kiln
