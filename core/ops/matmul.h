// Matrix products: matmul (NumPy semantics: 1-d, 2-d and batched with broadcast batch
// dims), bmm and linear. einsum, lowered to permute/reshape/bmm, is in einsum.h.
//
// Every product reduces to Backend::bmm on [B, M, K] x [B, K, N] views; gradients are
// products again: dA = g B^T, dB = A^T g (summed over broadcast batch dims).
#pragma once

#include "core/tensor.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b);
// a [B, M, K], b [B, K, N] -> [B, M, N]; no broadcasting (as torch.bmm).
Tensor bmm(const Tensor& a, const Tensor& b);
// x [..., in] @ weight[out, in]^T + bias[out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace kiln
