// CudaBackend::bmm: batched matrix products through cuBLAS (integer dtypes through the
// tiled kernel of matmul_integer.cu).
//
// out[z] = a[z] @ b[z] with a [B, M, K], b [B, K, N], out [B, M, N], any strides, out
// overwritten (=) and not overlapping a or b (as on the CPU). One
// cublasGemmStridedBatchedEx call covers the whole batch (split only past cuBLAS's int
// batch count): the operands are swapped so that column-major cuBLAS computes the
// row-major product (Note [Row-major products on column-major cuBLAS] in matmul_plan.h).
// Operands whose layout cuBLAS cannot read are copied to contiguous temporaries (a
// broadcast batch only once); an output it cannot write receives the product through a
// temporary and a copy.
//
// Types: float32 with CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 when
// allow_tf32_matmul() (Note [TF32] in core/flags.h); float16 and bfloat16 with float32
// accumulation (CUBLAS_COMPUTE_32F, and no reduced-precision split-K: cublas_handle.cpp);
// float64 with CUBLAS_COMPUTE_64F. alpha = 1 and beta = 0 in the compute type, so out's
// old contents (NaN included) are never read.
#include <cublas_v2.h>

#include <algorithm>
#include <optional>

#include "core/autograd/grad_mode.h"
#include "core/flags.h"
#include "core/kernel_memory.h"
#include "kernels/cuda/cublas/cublas_handle.h"
#include "kernels/cuda/cublas/matmul_integer.h"
#include "kernels/cuda/cublas/matmul_plan.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/launch.h"

namespace kiln::cuda {
namespace {

// cuBLAS's names for a floating dtype and the precision it is multiplied in.
struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

GemmTypes gemm_types(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return {CUDA_R_32F, allow_tf32_matmul() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::Float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::Float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case DType::BFloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default: KILN_ASSERT(false, "bmm: no cuBLAS type for ", dtype); __builtin_unreachable();
  }
}

MatrixLayout matrix_layout(const Tensor& t) { return {t.size(1), t.size(2), t.stride(1), t.stride(2)}; }

// A batch of matrices as cuBLAS reads it: X^T (transpose, ld) at `data`, batch after
// batch `batch_stride` elements apart. `storage` keeps a temporary alive.
struct GemmOperand {
  Tensor storage;
  TransposedView view;
  int64_t batch_stride;
  const char* data() const { return static_cast<const char*>(storage.data_ptr()); }
};

// `x` itself when cuBLAS can read it in place; otherwise a contiguous copy made with the
// backend's copy kernel. A broadcast batch (stride 0) is copied once and stays broadcast.
GemmOperand gemm_operand(CudaBackend& backend, const Tensor& x) {
  if (const std::optional<TransposedView> view = transposed_view(matrix_layout(x))) {
    return {x, *view, cublas_batch_stride(x.size(0), x.stride(0))};
  }
  const bool broadcast_batch = x.stride(0) == 0;
  const Tensor source = broadcast_batch ? x.narrow(0, 0, 1) : x;
  const Tensor packed = allocate_tensor(source.sizes(), x.dtype(), x.device());
  backend.copy(source, packed, /*non_blocking=*/false);
  const std::optional<TransposedView> view = transposed_view(matrix_layout(packed));
  KILN_ASSERT(view.has_value(), "bmm: a contiguous ", packed.sizes(), " operand is not readable by cuBLAS");
  return {packed, *view, broadcast_batch ? 0 : cublas_batch_stride(packed.size(0), packed.stride(0))};
}

cublasOperation_t cublas_op(const TransposedView& view) { return view.transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

// out (already usable as C^T with leading dimension ldc) = a @ b, for a floating dtype.
void cublas_bmm(const GemmOperand& a, const GemmOperand& b, const Tensor& out, int64_t ldc, Stream stream) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.storage.size(2);
  const GemmTypes types = gemm_types(out.dtype());
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const bool f64 = types.compute == CUBLAS_COMPUTE_64F;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  const int64_t element = static_cast<int64_t>(out.element_size());
  const int64_t out_batch_stride = cublas_batch_stride(batch, out.stride(0));
  const cublasHandle_t handle = cublas_handle(stream);
  // The batch count is an int: a larger batch runs as several calls.
  for (int64_t first = 0; first < batch; first += INT_MAX) {
    const int64_t count = std::min<int64_t>(batch - first, INT_MAX);
    KILN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, cublas_op(b.view), cublas_op(a.view), static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
        alpha, b.data() + first * b.batch_stride * element, types.data, static_cast<int>(b.view.ld), b.batch_stride,
        a.data() + first * a.batch_stride * element, types.data, static_cast<int>(a.view.ld), a.batch_stride, beta,
        static_cast<char*>(out.data_ptr()) + first * out_batch_stride * element, types.data, static_cast<int>(ldc),
        out_batch_stride, static_cast<int>(count), types.compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

void CudaBackend::bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  KILN_ASSERT(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "bmm: operands of dtypes ", a.dtype(), ", ",
              b.dtype(), " and ", out.dtype());
  if (out.numel() == 0) return;
  if (a.size(2) == 0) {  // an empty sum: zeros, without asking cuBLAS about k = 0
    fill(out, 0);
    return;
  }
  if (!is_floating(out.dtype())) {
    bmm_integer(a, b, out);
    return;
  }
  const int64_t m = out.size(1), n = out.size(2), k = a.size(2);
  KILN_CHECK(fits_cublas_int(m) && fits_cublas_int(n) && fits_cublas_int(k), "bmm: matrix sizes M = ", m,
             ", N = ", n, ", K = ", k, " exceed cuBLAS's limit of ", INT_MAX, " per dimension");
  const OnDevice on(out.device().index);
  const NoGradGuard no_grad;  // the temporaries below are plumbing, not part of any graph
  const GemmOperand a_operand = gemm_operand(*this, a);
  const GemmOperand b_operand = gemm_operand(*this, b);
  if (const std::optional<int64_t> ldc = output_ld(matrix_layout(out))) {
    cublas_bmm(a_operand, b_operand, out, *ldc, on.stream);
    return;
  }
  const Tensor product = allocate_tensor(out.sizes(), out.dtype(), out.device());
  cublas_bmm(a_operand, b_operand, product, *output_ld(matrix_layout(product)), on.stream);
  copy(product, out, /*non_blocking=*/false);
}

}  // namespace kiln::cuda
