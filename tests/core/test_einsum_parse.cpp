// einsum's equation parser (core/ops/einsum_parse.h) on its own: the labels it gives each
// operand's dims and the output, explicit and implicit, with "..." aligned from the right
// and spaces ignored; and every malformed equation rejected with a message naming it.
#include <gtest/gtest.h>

#include "core/ops/einsum_parse.h"
#include "core/ops/factory.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using einsum_detail::EinsumLabels;
using einsum_detail::parse_einsum;

// Operands of the given shapes (the parser reads only their shapes).
std::vector<Tensor> of_shapes(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<Tensor> operands;
  for (const std::vector<int64_t>& s : shapes) operands.push_back(empty(s));
  return operands;
}

void expect_labels(const EinsumLabels& got, const std::vector<std::string>& inputs,
                   const std::string& output) {
  EXPECT_EQ(got.inputs, inputs);
  EXPECT_EQ(got.output, output);
}

TEST(EinsumParse, ExplicitOutputKeepsItsOrder) {
  expect_labels(parse_einsum("ij,jk->ik", of_shapes({{3, 4}, {4, 5}})), {"ij", "jk"}, "ik");
  expect_labels(parse_einsum("ij->ji", of_shapes({{3, 4}})), {"ij"}, "ji");
  expect_labels(parse_einsum("ij->", of_shapes({{3, 4}})), {"ij"}, "");
  expect_labels(parse_einsum(" b i j , b j k -> b i k ", of_shapes({{2, 3, 4}, {2, 4, 5}})), {"bij", "bjk"},
                "bik");
}

TEST(EinsumParse, ImplicitOutputIsTheLettersUsedOnceSorted) {
  expect_labels(parse_einsum("ij,jk", of_shapes({{3, 4}, {4, 5}})), {"ij", "jk"}, "ik");
  expect_labels(parse_einsum("ba", of_shapes({{3, 4}})), {"ba"}, "ab");
  expect_labels(parse_einsum("i,i", of_shapes({{3}, {3}})), {"i", "i"}, "");
}

TEST(EinsumParse, EllipsisDimsAreAlignedFromTheRightAndLeadTheImplicitOutput) {
  const char e0 = einsum_detail::kEllipsisLabel, e1 = static_cast<char>(e0 + 1);
  const std::string both = {e0, e1};
  expect_labels(parse_einsum("...ij,jk->...ik", of_shapes({{2, 7, 3, 4}, {4, 5}})), {both + "ij", "jk"},
                both + "ik");
  // [7, 3, 4] has one broadcast dim, [2, 7, 4, 5] two: the one is the second of the two.
  expect_labels(parse_einsum("...ij,...jk", of_shapes({{7, 3, 4}, {2, 7, 4, 5}})),
                {std::string(1, e1) + "ij", both + "jk"}, both + "ik");
  // "..." may cover no dims.
  expect_labels(parse_einsum("...ij->...ji", of_shapes({{3, 4}})), {"ij"}, "ji");
}

TEST(EinsumParse, BadEquationsAreErrorsNamingThem) {
  const std::vector<Tensor> matrix = of_shapes({{3, 4}});
  EXPECT_KILN_ERROR(parse_einsum("ij,jk->ik", matrix),
                    "einsum: 'ij,jk->ik' has 2 terms but 1 operands were given");
  EXPECT_KILN_ERROR(parse_einsum("ij,jk->ik", {empty({3, 4}), Tensor()}), "einsum: operand 1 is undefined");
  EXPECT_KILN_ERROR(parse_einsum("i1->i", matrix), "einsum: invalid subscript '1' in 'i1->i'", "letters");
  EXPECT_KILN_ERROR(parse_einsum("ij->i.", matrix), "einsum: invalid subscript '.' in 'ij->i.'");
  // A second "..." meets the letter check first, as stray '.'s.
  EXPECT_KILN_ERROR(parse_einsum("...i...->i", matrix), "einsum: invalid subscript '.' in '...i...->i'");
  EXPECT_KILN_ERROR(parse_einsum("...ijk->i", matrix), "einsum: operand has fewer dimensions than subscripts",
                    "'...ijk->i'");
  EXPECT_KILN_ERROR(parse_einsum("ijk->i", matrix), "einsum: term 'ijk' of 'ijk->i' has 3 subscripts",
                    "operand 0 has 2 dimensions (shape [3, 4])");
  EXPECT_KILN_ERROR(parse_einsum("ii->i", of_shapes({{3, 3}})),
                    "einsum: subscript 'i' repeats within operand 0", "'ii->i'",
                    "diagonals are not supported");
  EXPECT_KILN_ERROR(parse_einsum("ij->k", matrix),
                    "einsum: output subscript 'k' of 'ij->k' appears in no operand");
  EXPECT_KILN_ERROR(parse_einsum("ij->ii", matrix), "einsum: output subscript 'i' repeats in 'ij->ii'");
}

}  // namespace
}  // namespace kiln
