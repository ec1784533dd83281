// einsum against naive loops and equivalent ops, malformed equations, gradient checks.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::random_nonzero;
using Inputs = std::vector<Tensor>;

Tensor r(const std::vector<int64_t>& s, uint64_t seed) { return random_nonzero(s, DType::Float64, seed); }

TEST(Einsum, MatchesEquivalentOps) {
  const Tensor a = r({3, 4}, 1), b = r({4, 5}, 2), v = r({4}, 3), w = r({4}, 4);
  const Tensor ba = r({2, 3, 4}, 5), bb = r({2, 4, 5}, 6);
  EXPECT_TRUE(all_close(einsum("ij,jk->ik", {a, b}), matmul(a, b)));
  EXPECT_TRUE(all_close(einsum("ij,jk", {a, b}), matmul(a, b)));  // implicit output
  EXPECT_TRUE(all_close(einsum("bij,bjk->bik", {ba, bb}), bmm(ba, bb)));
  EXPECT_TRUE(all_close(einsum("ij->ji", {a}), a.t().contiguous()));
  EXPECT_TRUE(all_close(einsum("ij->", {a}), sum(a)));
  EXPECT_TRUE(all_close(einsum("i,i->", {v, w}), sum(mul(v, w))));
  EXPECT_TRUE(all_close(einsum("i,j->ij", {v, r({3}, 7)}), mul(v.unsqueeze(1), r({3}, 7).unsqueeze(0))));
  EXPECT_TRUE(all_close(einsum("ijk->i", {ba.permute({1, 0, 2})}), sum(ba.permute({1, 0, 2}), {1, 2})));
  EXPECT_TRUE(all_close(einsum("...ij,...jk->...ik", {ba, bb}), bmm(ba, bb)));
  EXPECT_TRUE(all_close(einsum("...ij,jk->...ik", {ba, b}), matmul(ba, b)));
  const Tensor c = r({5, 2}, 8);
  EXPECT_TRUE(all_close(einsum("ij,jk,kl->il", {a, b, c}), matmul(matmul(a, b), c)));
}

TEST(Einsum, AttentionScoresMatchANaiveLoop) {
  const Tensor q = r({2, 3, 4, 5}, 1), k = r({2, 3, 6, 5}, 2);  // b h q d, b h k d
  const Tensor got = einsum("bhqd,bhkd->bhqk", {q, k});
  const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(), gv = got.to_vector<double>();
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 3, 4, 6}));
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) {
          double s = 0;
          for (int d = 0; d < 5; ++d) s += qv[((b * 3 + h) * 4 + i) * 5 + d] * kv[((b * 3 + h) * 6 + j) * 5 + d];
          EXPECT_NEAR(gv[((b * 3 + h) * 4 + i) * 6 + j], s, 1e-12);
        }
}

TEST(Einsum, BroadcastsSizeOneDims) {
  const Tensor a = r({1, 3, 4}, 1), b = r({2, 4, 5}, 2);
  EXPECT_TRUE(all_close(einsum("bij,bjk->bik", {a, b}), matmul(a, b)));
}

TEST(Einsum, ErrorsNameTheEquation) {
  const Tensor a = r({3, 4}, 1);
  EXPECT_KILN_ERROR(einsum("ij,jk->ik", {a}), "einsum", "2 terms but 1 operands");
  EXPECT_KILN_ERROR(einsum("ijk->i", {a}), "einsum", "3 subscripts", "2 dimensions");
  EXPECT_KILN_ERROR(einsum("ii->i", {r({3, 3}, 2)}), "einsum", "repeats", "diagonals");
  EXPECT_KILN_ERROR(einsum("ij->k", {a}), "einsum", "'k'", "appears in no operand");
  EXPECT_KILN_ERROR(einsum("i1->i", {a}), "einsum", "invalid subscript");
  EXPECT_KILN_ERROR(einsum("ij,jk->ik", {a, r({5, 2}, 3)}), "einsum", "'j'", "size 4", "5");
}

KILN_GRADCHECK_TEST(einsum) {
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return einsum("ij,jk->ik", v); },
                        {r({3, 4}, 1).requires_grad_(true), r({4, 2}, 2).requires_grad_(true)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return einsum("bij,bkj->bik", v); },
                        {r({2, 3, 4}, 3).requires_grad_(true), r({2, 2, 4}, 4).requires_grad_(true)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return einsum("ijk->ki", v); }, {r({2, 3, 4}, 5).requires_grad_(true)}));
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return einsum("i,j,j->i", v); },
                        {r({3}, 6).requires_grad_(true), r({2}, 7).requires_grad_(true), r({2}, 8).requires_grad_(true)}));
}

}  // namespace
}  // namespace kiln
