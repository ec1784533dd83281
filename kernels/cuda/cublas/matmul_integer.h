// Batched integer GEMM on the GPU (matmul_integer.cu): cuBLAS has no integer products with
// wrap-around accumulation, so Int64, Int32 and UInt8 bmm use a tiled kernel of our own.
#pragma once

#include "core/tensor.h"

namespace kiln::cuda {

// out[b] = a[b] @ bmat[b] for Int64/Int32/UInt8: a [B, M, K], b [B, K, N], out [B, M, N],
// any strides (stride 0 included), out not overlapping a or b. Overwrites out.
void bmm_integer(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace kiln::cuda
