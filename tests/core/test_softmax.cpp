// softmax and log_softmax against naive reference loops along every dim, on contiguous,
// non-contiguous, transposed and expanded inputs, in every float dtype; extreme values
// (no overflow), -inf entries, NaN rows, long rows, 0-d and empty tensors; the fused
// backward kernels against their formulas; error messages; gradient checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "kernels/vectorisable_exp.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::non_contiguous;
using testing::random_nonzero;
using testing::random_uniform;

constexpr double kInf = std::numeric_limits<double>::infinity();
const DType kFloatTypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16};

// Visits the rows of `sizes` along `dim`: fn(indices of the row's elements, row-major).
template <typename Fn>
void for_each_row(const std::vector<int64_t>& sizes, int64_t dim, const Fn& fn) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
  for (size_t d = dim + 1; d < sizes.size(); ++d) inner *= sizes[d];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> row;
      for (int64_t j = 0; j < sizes[dim]; ++j) row.push_back((o * sizes[dim] + j) * inner + i);
      fn(row);
    }
  }
}

// The textbook formulas in double, one row at a time, without the max shift (the inputs
// here are small enough for exp not to overflow).
Tensor reference_softmax(const Tensor& x, int64_t dim, bool log) {
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> out(v.size());
  for_each_row(x.sizes(), dim, [&](const std::vector<int64_t>& row) {
    double s = 0;
    for (int64_t i : row) s += std::exp(v[i]);
    for (int64_t i : row) out[i] = log ? v[i] - std::log(s) : std::exp(v[i]) / s;
  });
  return tensor(out, x.sizes());
}

// grad_in from the output y and the gradient g (backend.h's formulas), in double.
Tensor reference_softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const std::vector<double> gv = g.to_vector<double>(), yv = y.to_vector<double>();
  std::vector<double> out(gv.size());
  for_each_row(y.sizes(), dim, [&](const std::vector<int64_t>& row) {
    double dot = 0;
    for (int64_t i : row) dot += log ? gv[i] : gv[i] * yv[i];
    for (int64_t i : row) out[i] = log ? gv[i] - std::exp(yv[i]) * dot : yv[i] * (gv[i] - dot);
  });
  return tensor(out, y.sizes());
}

Tensor softmax_of(const Tensor& x, int64_t dim, bool log) {
  return log ? log_softmax(x, dim) : softmax(x, dim);
}

TEST(Softmax, MatchesReferenceAlongEveryDimLayoutAndDtype) {
  for (DType dtype : kFloatTypes) {
    const Tensor x = random_uniform({3, 4, 5}, -3, 3, dtype, 1);
    const Tensor expanded = x.narrow(0, 0, 1).expand({3, 4, 5});  // stride 0 along dim 0
    for (const Tensor& input :
         {x, non_contiguous(x), x.transpose(0, 2).contiguous().transpose(0, 2), expanded}) {
      for (int64_t dim : {0, 1, 2, -1}) {
        for (bool log : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " dim " + std::to_string(dim) + (log ? " log" : ""));
          const Tensor got = softmax_of(input, dim, log);
          ASSERT_EQ(got.dtype(), dtype);
          const int64_t d = dim < 0 ? dim + 3 : dim;
          ASSERT_TRUE(all_close(got, reference_softmax(input, d, log).to(dtype)));
        }
      }
    }
  }
}

// Rows side by side in memory (dim != last of a contiguous tensor) are walked in blocks;
// 150 of them make two full blocks and a partial one.
TEST(Softmax, ManyNeighbouringRowsAlongAMiddleDim) {
  for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16}) {
    const Tensor x = random_uniform({2, 7, 150}, -3, 3, dtype, 6);
    for (int64_t dim : {0, 1}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " dim " + std::to_string(dim) + (log ? " log" : ""));
        EXPECT_TRUE(all_close(softmax_of(x, dim, log), reference_softmax(x, dim, log).to(dtype)));
        Tensor leaf = x.detach().requires_grad_(true);
        const Tensor y = softmax_of(leaf, dim, log);
        const Tensor g = random_nonzero({2, 7, 150}, dtype, 7);
        y.backward(g);
        EXPECT_TRUE(all_close(leaf.grad(), reference_softmax_backward(g, y.detach(), dim, log).to(dtype)));
      }
    }
  }
}

// Float32 rows contiguous along the last dim take the lane kernels forward and backward
// (softmax_row, softmax_bwd_row): lengths below, at and past the 16 lanes, with a tail,
// and a classifier's 1000 logits.
TEST(Softmax, Float32ContiguousRowsBackwardInLanesAndTail) {
  for (int64_t length : {5, 16, 37, 1000}) {
    const Tensor x = random_uniform({3, length}, -4, 4, DType::Float32, 8);
    const Tensor g = random_nonzero({3, length}, DType::Float32, 9);
    for (bool log : {false, true}) {
      SCOPED_TRACE("length " + std::to_string(length) + (log ? " log" : ""));
      Tensor leaf = x.detach().requires_grad_(true);
      const Tensor y = softmax_of(leaf, 1, log);
      y.backward(g);
      EXPECT_TRUE(all_close(leaf.grad(), reference_softmax_backward(g, y.detach(), 1, log).to(DType::Float32)));
    }
  }
}

TEST(Softmax, LongRowsSumToOne) {
  const Tensor x = random_uniform({2, 100000}, -5, 5, DType::Float32, 2);
  const Tensor y = softmax(x, 1);
  EXPECT_TRUE(all_close(sum(y, {1}), ones({2}), {1e-6, 1e-6}));
  EXPECT_TRUE(all_close(y, reference_softmax(x, 1, false).to(DType::Float32)));
  EXPECT_TRUE(all_close(log_softmax(x.t(), 0), reference_softmax(x, 1, true).to(DType::Float32).t()));
}

TEST(Softmax, IsStableForExtremeValuesAndInfinities) {
  for (DType dtype : {DType::Float64, DType::Float32, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    // exp(1000) overflows every dtype: only the max shift keeps this finite.
    const double big = 1000;  // 1000 and 999 are exact in float16 too
    const Tensor x = tensor<double>({big, big - 1, -kInf}).to(dtype);
    const double p0 = 1 / (1 + std::exp(-1.0));
    EXPECT_TRUE(all_close(softmax(x, 0), tensor<double>({p0, 1 - p0, 0}).to(dtype)));
    const Tensor logs = log_softmax(x, 0);
    EXPECT_TRUE(all_close(logs.narrow(0, 0, 2), tensor<double>({std::log(p0), std::log(1 - p0)}).to(dtype)));
    EXPECT_EQ(logs.to_vector<double>()[2], -kInf);
    EXPECT_TRUE(all_close(softmax(neg(x.narrow(0, 0, 2)), 0), tensor<double>({1 - p0, p0}).to(dtype)));
  }
}

TEST(Softmax, RowsOfAllMinusInfOrNaNGiveNaNAsPyTorch) {
  const Tensor x = tensor<double>({-kInf, -kInf, 1, 2, std::nan(""), 0}, {3, 2});
  const std::vector<double> y = softmax(x, 1).to_vector<double>();
  const std::vector<double> l = log_softmax(x, 1).to_vector<double>();
  for (int i : {0, 1, 4, 5}) {
    EXPECT_TRUE(std::isnan(y[i])) << i;
    EXPECT_TRUE(std::isnan(l[i])) << i;
  }
  EXPECT_NEAR(y[2] + y[3], 1.0, 1e-15);  // the middle row is untouched
}

// The float32 kernel for contiguous rows works in 16 lanes plus a tail (Note [Vectorised
// softmax] in kernels/cpu/softmax.cpp): a NaN in either part, or a row of -inf, still
// makes the whole row NaN; -inf entries among finite ones give 0 (log: -inf).
TEST(Softmax, Float32RowsInLanesAndTailFollowPyTorchOnNaNAndInf) {
  constexpr int64_t kRow = 37;  // two blocks of 16 lanes and a tail of 5
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t at : {int64_t{3}, int64_t{20}, int64_t{35}}) {
    SCOPED_TRACE("NaN at " + std::to_string(at));
    std::vector<float> values(kRow, 0.5f);
    values[static_cast<size_t>(at)] = nan;
    const Tensor x = tensor<float>(values, {1, kRow});
    for (float v : softmax(x, 1).to_vector<float>()) EXPECT_TRUE(std::isnan(v));
    for (float v : log_softmax(x, 1).to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  }
  const Tensor all_minus_inf = full({1, kRow}, -kInf, {.dtype = DType::Float32});
  for (float v : softmax(all_minus_inf, 1).to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  std::vector<float> some(kRow, 1.0f);
  some[7] = some[33] = -inf;
  const std::vector<float> y = softmax(tensor<float>(some, {1, kRow}), 1).to_vector<float>();
  const std::vector<float> l = log_softmax(tensor<float>(some, {1, kRow}), 1).to_vector<float>();
  for (int64_t i = 0; i < kRow; ++i) {
    const bool masked = i == 7 || i == 33;
    EXPECT_FLOAT_EQ(y[static_cast<size_t>(i)], masked ? 0.0f : 1.0f / (kRow - 2)) << i;
    EXPECT_FLOAT_EQ(l[static_cast<size_t>(i)], masked ? -inf : -std::log(static_cast<float>(kRow - 2))) << i;
  }
}

// Note [Vectorisable exp]: within 2 ulp of the correctly rounded exp over its whole range
// (2^21 evenly spaced points from -103.9 to 88.7, plus the floats around 0, against exp in
// double; subnormal results within 2 of their spacing), and its special values.
TEST(Softmax, VectorisableExpIsWithinTwoUlpOfExp) {
  std::vector<float> points;
  constexpr int64_t kPoints = int64_t{1} << 21;
  for (int64_t i = 0; i <= kPoints; ++i) points.push_back(static_cast<float>(-103.9 + 192.6 * i / kPoints));
  float around_zero = 0;
  for (int i = 0; i < 1000; ++i) {
    points.push_back(around_zero);
    points.push_back(-around_zero);
    around_zero = std::nextafter(around_zero, 1.0f);
  }
  double worst = 0;
  float worst_at = 0;
  for (float x : points) {
    const double want = std::exp(static_cast<double>(x));
    const float got = vectorisable_exp(x);
    if (want < static_cast<double>(std::numeric_limits<float>::min())) {
      EXPECT_LE(std::fabs(got - want), 2 * static_cast<double>(std::numeric_limits<float>::denorm_min()))
          << x;
      continue;
    }
    const float rounded = static_cast<float>(want);
    const double ulp =
        static_cast<double>(std::nextafter(rounded, std::numeric_limits<float>::infinity()) - rounded);
    const double error = std::fabs(static_cast<double>(got) - want) / ulp;
    if (error > worst) {
      worst = error;
      worst_at = x;
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_at;
  EXPECT_EQ(vectorisable_exp(0.0f), 1.0f);
  EXPECT_EQ(vectorisable_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(vectorisable_exp(-200.0f), 0.0f);
  EXPECT_EQ(vectorisable_exp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(vectorisable_exp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(vectorisable_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Softmax, ZeroDimAndEmptyTensors) {
  const Tensor s = scalar_tensor(3.0, {.dtype = DType::Float64});
  EXPECT_DOUBLE_EQ(softmax(s, 0).item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(log_softmax(s, -1).item<double>(), 0.0);
  EXPECT_EQ(softmax(s, 0).dim(), 0);
  Tensor leaf = s.detach().requires_grad_(true);
  log_softmax(leaf, 0).backward();
  EXPECT_DOUBLE_EQ(leaf.grad().item<double>(), 0.0);  // 1 - exp(0) * 1
  EXPECT_EQ(softmax(zeros({0, 4}), 1).sizes(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(log_softmax(zeros({3, 0}), 1).sizes(), (std::vector<int64_t>{3, 0}));
  Tensor e = zeros({0, 4}).requires_grad_(true);
  softmax(e, 1).sum().backward();
  EXPECT_EQ(e.grad().sizes(), (std::vector<int64_t>{0, 4}));
}

// The backend's kernels themselves (the public ops return early for empty tensors, the
// CUDA parity tests do not): an empty dim other than the softmax dim used to divide by
// zero while splitting the rows into blocks.
TEST(Softmax, BackendKernelsTakeEmptyTensors) {
  for (const auto& [sizes, dim] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{0, 5}, 1}, {{3, 0}, 1}, {{2, 0, 4}, 2}, {{0, 7}, 0}}) {
    const Tensor x = zeros(sizes), y = zeros(sizes), g = zeros(sizes);
    backend(Device::cpu()).softmax(x, dim, /*log=*/false, y);
    backend(Device::cpu()).softmax_backward(g, y, dim, /*log=*/true, x);
    EXPECT_EQ(y.sizes(), sizes);
  }
}

// The backward kernels against their formulas, with a non-contiguous gradient.
TEST(Softmax, BackwardMatchesFormulaInEveryDtype) {
  for (DType dtype : kFloatTypes) {
    for (int64_t dim : {0, 1, 2}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " dim " + std::to_string(dim) + (log ? " log" : ""));
        const Tensor g = random_nonzero({3, 4, 5}, dtype, 4);
        for (const Tensor& grad_out : {g, non_contiguous(g)}) {
          Tensor x = random_uniform({3, 4, 5}, -2, 2, dtype, 3).requires_grad_(true);
          const Tensor y = softmax_of(x, dim, log);
          y.backward(grad_out);
          const Tensor expected = reference_softmax_backward(grad_out, y.detach(), dim, log).to(dtype);
          // Both start from the same rounded y and g; the kernel rounds only its result.
          EXPECT_TRUE(all_close(x.grad(), expected));
        }
      }
    }
  }
}

TEST(Softmax, GradientOfASumIsZeroAndAnExpandedGradientWorks) {
  // sum(softmax) = 1 for every input: its gradient is 0. The gradient arrives expanded.
  Tensor x = random_uniform({4, 6}, -2, 2, DType::Float64, 5).requires_grad_(true);
  softmax(x, 1).sum().backward();
  EXPECT_TRUE(all_close(x.grad(), zeros({4, 6}, {.dtype = DType::Float64}), {1e-15, 0}));
  x.set_grad(Tensor());
  log_softmax(x, 0).sum().backward();  // 1 - n softmax along dim 0
  EXPECT_TRUE(all_close(x.grad(), 1.0 - mul(softmax(x.detach(), 0), 4.0)));
}

TEST(Softmax, ErrorMessages) {
  EXPECT_KILN_ERROR(softmax(zeros({2, 3}, {.dtype = DType::Int64}), 1), "softmax", "floating-point", "int64");
  EXPECT_KILN_ERROR(log_softmax(zeros({2}, {.dtype = DType::Bool}), 0), "log_softmax", "floating-point",
                    "bool");
  EXPECT_KILN_ERROR(softmax(zeros({2, 3}), 2), "softmax", "dimension 2 out of range");
  EXPECT_KILN_ERROR(log_softmax(zeros({2, 3}), -3), "log_softmax", "out of range");
  EXPECT_KILN_ERROR(softmax(Tensor(), 0), "softmax", "undefined");
}

// ---- gradient checks ------------------------------------------------------------------------

using Inputs = std::vector<Tensor>;

Tensor leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return random_uniform(sizes, -2, 2, DType::Float64, seed).requires_grad_(true);
}

Tensor strided_leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return non_contiguous(random_uniform(sizes, -2, 2, DType::Float64, seed)).detach().requires_grad_(true);
}

KILN_GRADCHECK_TEST(softmax) {
  for (int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(gradcheck([dim](const Inputs& v) { return softmax(v[0], dim); }, {leaf({3, 4, 2}, 1)}));
    EXPECT_TRUE(
        gradcheck([dim](const Inputs& v) { return softmax(v[0], dim); }, {strided_leaf({3, 4, 2}, 2)}));
  }
}

KILN_GRADCHECK_TEST(log_softmax) {
  for (int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(gradcheck([dim](const Inputs& v) { return log_softmax(v[0], dim); }, {leaf({3, 4, 2}, 3)}));
    EXPECT_TRUE(
        gradcheck([dim](const Inputs& v) { return log_softmax(v[0], dim); }, {strided_leaf({3, 4, 2}, 4)}));
  }
}

}  // namespace
}  // namespace kiln
