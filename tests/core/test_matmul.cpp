// Matrix products against a naive triple loop: every matmul shape case (1-d, 2-d,
// batched with broadcast batch dims), strided and expanded operands, each dtype, K = 0;
// bmm and linear; error messages; gradient checks.
#include <gtest/gtest.h>

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
using Inputs = std::vector<Tensor>;

// C[b] = A[b] B[b] by three loops in double, for [B, M, K] x [B, K, N] inputs.
Tensor naive_bmm(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) s += av[(p * m + i) * k + q] * bv[(p * k + q) * n + j];
        c[(p * m + i) * n + j] = s;
      }
  return tensor(c, {batch, m, n});
}

// torch.matmul semantics spelled out with the naive bmm.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  std::vector<int64_t> ba(a2.sizes().begin(), a2.sizes().end() - 2), bb(b2.sizes().begin(), b2.sizes().end() - 2);
  std::vector<int64_t> batch = broadcast_shapes(ba, bb, "naive");
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  std::vector<int64_t> sa = batch, sb = batch;
  sa.insert(sa.end(), {a2.size(-2), a2.size(-1)});
  sb.insert(sb.end(), {b2.size(-2), b2.size(-1)});
  Tensor c = naive_bmm(a2.expand(sa).contiguous().reshape({nb, a2.size(-2), a2.size(-1)}),
                       b2.expand(sb).contiguous().reshape({nb, b2.size(-2), b2.size(-1)}));
  std::vector<int64_t> out = batch;
  if (a.dim() > 1) out.push_back(a2.size(-2));
  if (b.dim() > 1) out.push_back(b2.size(-1));
  return c.reshape(out);
}

TEST(Matmul, MatmulShapeCasesMatchTheNaiveLoop) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{5}, {5}},          {{7, 13}, {13, 5}},       {{13}, {13, 4}},       {{3, 13}, {13}},
      {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {5, 4, 6}}, {{4}, {2, 4, 3}},      {{2, 3, 4}, {4}},
      {{1, 1}, {1, 1}},    {{6, 1}, {1, 9}},         {{2, 5, 3}, {2, 3, 1}}};
  for (DType dtype : {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16}) {
    for (const auto& [sa, sb] : cases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(sa) + " @ " + shape_str(sb));
      const Tensor a = random_nonzero(sa, dtype, 1), b = random_nonzero(sb, dtype, 2);
      const Tensor expected = naive_matmul(a, b).to(dtype);
      const testing::Tolerance tol = dtype == DType::Float64   ? testing::Tolerance{1e-12, 1e-12}
                                     : dtype == DType::Float32 ? testing::Tolerance{1e-5, 1e-5}
                                                               : testing::Tolerance{0.1, 0.02};
      EXPECT_TRUE(all_close(matmul(a, b), expected, tol));
      if (a.dim() >= 2 && b.dim() >= 2) {
        EXPECT_TRUE(all_close(matmul(non_contiguous(a), non_contiguous(b)), expected, tol));
      }
    }
  }
}

TEST(Matmul, TransposedAndExpandedOperandsNeedNoCopyAndAreRight) {
  const Tensor a = random_nonzero({6, 4}, DType::Float32, 3);
  const Tensor b = random_nonzero({5, 6}, DType::Float32, 4);
  EXPECT_TRUE(all_close(matmul(a.t(), b.t()), naive_matmul(a.t(), b.t()).to(DType::Float32)));
  const Tensor batch = random_nonzero({1, 4, 3}, DType::Float32, 5).expand({7, 4, 3});  // stride 0
  const Tensor rhs = random_nonzero({7, 3, 2}, DType::Float32, 6);
  EXPECT_TRUE(all_close(bmm(batch, rhs), naive_bmm(batch, rhs).to(DType::Float32)));
  // Output rows written with a row stride of 2 through a non-contiguous rhs.
  const Tensor wide = random_nonzero({4, 8}, DType::Float64, 7).slice(1, 0, std::nullopt, 2);
  EXPECT_TRUE(all_close(matmul(a.to(DType::Float64), wide), naive_matmul(a.to(DType::Float64), wide)));
}

TEST(Matmul, IntegerProductsAreExactAndEmptyKGivesZeros) {
  const Tensor a = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = tensor<int64_t>({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_TRUE(all_equal(matmul(a, b), tensor<int64_t>({58, 64, 139, 154}, {2, 2})));
  const Tensor z = matmul(zeros({3, 0}), zeros({0, 4}));
  EXPECT_TRUE(all_equal(z, zeros({3, 4})));
  EXPECT_EQ(matmul(zeros({0, 3}), zeros({3, 4})).sizes(), (std::vector<int64_t>{0, 4}));
}

TEST(Matmul, LinearMatchesMatmulPlusBias) {
  const Tensor x = random_nonzero({2, 3, 5}, DType::Float64, 1);
  const Tensor w = random_nonzero({4, 5}, DType::Float64, 2);
  const Tensor b = random_nonzero({4}, DType::Float64, 3);
  EXPECT_TRUE(all_close(linear(x, w, b), add(naive_matmul(x, w.t()), b)));
  EXPECT_TRUE(all_close(linear(x, w), naive_matmul(x, w.t())));
}

TEST(Matmul, ErrorsNameBothShapes) {
  EXPECT_KILN_ERROR(matmul(zeros({2, 3}), zeros({4, 5})), "matmul", "[2, 3]", "[4, 5]", "cannot be multiplied");
  EXPECT_KILN_ERROR(matmul(zeros({2, 3}), zeros({3, 2}, {.dtype = DType::Float64})), "matmul", "same dtype",
                    "float32", "float64");
  EXPECT_KILN_ERROR(matmul(scalar_tensor(1.0), zeros({2})), "matmul", "at least 1 dimension");
  EXPECT_KILN_ERROR(matmul(zeros({2, 2, 3}), zeros({3, 3, 2})), "matmul", "broadcast");
  EXPECT_KILN_ERROR(bmm(zeros({2, 3}), zeros({3, 2})), "bmm", "3-d");
  EXPECT_KILN_ERROR(bmm(zeros({2, 3, 4}), zeros({3, 4, 2})), "bmm", "[2, 3, 4]", "[3, 4, 2]");
  EXPECT_KILN_ERROR(linear(zeros({2, 3}), zeros({4, 5})), "linear", "in_features = 5");
  EXPECT_KILN_ERROR(linear(zeros({2, 5}), zeros({4, 5}), zeros({3})), "linear", "bias", "[4]");
}



KILN_GRADCHECK_TEST(matmul) {
  auto f = [](const Inputs& v) { return matmul(v[0], v[1]); };
  EXPECT_TRUE(gradcheck(f, {testing::grad_leaf({3, 4}, 1), testing::strided_grad_leaf({4, 2}, 2)}));
  EXPECT_TRUE(gradcheck(f, {testing::grad_leaf({2, 1, 3, 4}, 3), testing::grad_leaf({2, 4, 2}, 4)}));  // broadcast batch
  EXPECT_TRUE(gradcheck(f, {testing::grad_leaf({4}, 5), testing::grad_leaf({2, 4, 3}, 6)}));
  EXPECT_TRUE(gradcheck(f, {testing::grad_leaf({2, 3, 4}, 7), testing::grad_leaf({4}, 8)}));
  EXPECT_TRUE(gradcheck(f, {testing::grad_leaf({5}, 9), testing::strided_grad_leaf({5}, 10)}));
}

KILN_GRADCHECK_TEST(bmm) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return bmm(v[0], v[1]); }, {testing::grad_leaf({2, 3, 4}, 1), testing::strided_grad_leaf({2, 4, 3}, 2)}));
}

KILN_GRADCHECK_TEST(linear) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return linear(v[0], v[1], v[2]); },
                        {testing::grad_leaf({2, 3, 4}, 1), testing::strided_grad_leaf({5, 4}, 2), testing::grad_leaf({5}, 3)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return linear(v[0], v[1]); }, {testing::grad_leaf({3, 4}, 4), testing::grad_leaf({2, 4}, 5)}));
}

}  // namespace
}  // namespace kiln
