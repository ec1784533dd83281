// einsum: Einstein summation, a composite of sums, permutes, reshapes and bmm, so its
// gradient comes from those ops (STYLE 3). Under autocast it is a lower-precision op
// (core/autocast.h).
//
// Built in three steps, one file each: einsum_parse.h reads the equation into one label
// per dim, einsum_plan.h decides which dims are summed, batched, contracted or kept and
// the permutes and reshapes that turn each contraction into one bmm, and einsum.cpp runs
// that plan with the public ops.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// Einstein summation over explicit ("ij,jk->ik") or implicit ("ij,jk") subscripts, any
// number of operands, "..." for broadcast dims. Repeated subscripts within one operand
// (a diagonal) are not supported. Errors name the equation.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace kiln
