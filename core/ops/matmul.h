// Matrix products: matmul (NumPy semantics: 1-d, 2-d and batched with broadcast batch
// dims), bmm, linear, and einsum (lowered to permute/reshape/bmm, in einsum.cpp).
//
// Every product reduces to Backend::bmm on [B, M, K] x [B, K, N] views; gradients are
// products again: dA = g B^T, dB = A^T g (summed over broadcast batch dims).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b);
// a [B, M, K], b [B, K, N] -> [B, M, N]; no broadcasting (as torch.bmm).
Tensor bmm(const Tensor& a, const Tensor& b);
// x [..., in] @ weight[out, in]^T + bias[out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Einstein summation over explicit ("ij,jk->ik") or implicit ("ij,jk") subscripts, any
// number of operands, "..." for broadcast dims. Repeated subscripts within one operand
// (a diagonal) are not supported.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace kiln
