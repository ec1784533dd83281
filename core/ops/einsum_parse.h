// The first step of einsum (einsum.h): reading the equation. Internal to core/ops.
//
// The equation is split into one term per operand and an output term (after "->", or
// implicit). Every dim of every operand gets one label: its subscript letter, or for the
// dims that "..." covers, a reserved label (kEllipsisLabel + i, never a letter) shared by
// all operands, aligned from the right as broadcasting aligns dims. The implicit output
// is the "..." dims, then the letters used exactly once, in alphabetical order (as NumPy
// and PyTorch). Every malformed equation is a kiln::Error naming it: a term count that
// differs from the operand count, a character that is not a letter (the dots of a second
// "..." in a term included), more subscripts than an operand has dims, a subscript
// repeated within one operand (a diagonal, not supported), an output subscript that is
// repeated or in no operand.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln::einsum_detail {

// The first reserved label: the dims of "..." are labelled kEllipsisLabel, +1, ...
constexpr char kEllipsisLabel = '0';

// One label per dim: inputs[i][d] labels dim d of operand i, output[d] dim d of the result.
struct EinsumLabels {
  std::vector<std::string> inputs;
  std::string output;
};

// Labels the dims of `operands` (which must be defined) by `equation`; spaces are ignored.
// Only the operands' shapes are read.
EinsumLabels parse_einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace kiln::einsum_detail
