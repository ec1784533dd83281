// TEMPORARY while the CUDA backend is being written: the entry points whose files are not
// in yet, so that everything links. Each family's author deletes its block. This file
// must be gone before the CUDA backend issue is closed.
#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"

namespace kiln::cuda {

#define KILN_PENDING(what) KILN_CHECK(false, "cuda: ", what, " is not written yet")

// ---- copy, fill, arange, unary, binary, where ------------------------------------------------
void CudaBackend::copy(const Tensor&, const Tensor&, bool) { KILN_PENDING("copy"); }
void CudaBackend::fill(const Tensor&, Scalar) { KILN_PENDING("fill"); }
void CudaBackend::arange(const Tensor&, Scalar, Scalar) { KILN_PENDING("arange"); }
void CudaBackend::unary(UnaryOp, const Tensor&, const Tensor&, const ElementwiseParams&) { KILN_PENDING("unary"); }
void CudaBackend::binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&, const ElementwiseParams&) {
  KILN_PENDING("binary");
}
void CudaBackend::where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { KILN_PENDING("where"); }
// ---- end elementwise -----------------------------------------------------------------------



// ---- reductions and softmax ----------------------------------------------------------------
void CudaBackend::reduce(ReduceOp, const Tensor&, const std::vector<int64_t>&, const Tensor&, const ReduceParams&) {
  KILN_PENDING("reduce");
}
void CudaBackend::var_mean(const Tensor&, const std::vector<int64_t>&, int64_t, const Tensor&, const Tensor&) {
  KILN_PENDING("var_mean");
}
void CudaBackend::arg_reduce(ArgReduceOp, const Tensor&, int64_t, const Tensor&, const Tensor&) {
  KILN_PENDING("arg_reduce");
}
void CudaBackend::softmax(const Tensor&, int64_t, bool, const Tensor&) { KILN_PENDING("softmax"); }
void CudaBackend::softmax_backward(const Tensor&, const Tensor&, int64_t, bool, const Tensor&) {
  KILN_PENDING("softmax_backward");
}
// ---- end reductions ------------------------------------------------------------------------



// ---- index and random ----------------------------------------------------------------------
void CudaBackend::gather(const Tensor&, int64_t, const Tensor&, const Tensor&) { KILN_PENDING("gather"); }
void CudaBackend::scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { KILN_PENDING("scatter_add"); }
void CudaBackend::index_select(const Tensor&, int64_t, const Tensor&, const Tensor&) { KILN_PENDING("index_select"); }
void CudaBackend::uniform(const Tensor&, double, double, PhiloxState) { KILN_PENDING("uniform"); }
void CudaBackend::normal(const Tensor&, double, double, PhiloxState) { KILN_PENDING("normal"); }
void CudaBackend::randint(const Tensor&, int64_t, int64_t, PhiloxState) { KILN_PENDING("randint"); }
void CudaBackend::randperm(const Tensor&, PhiloxState) { KILN_PENDING("randperm"); }
void CudaBackend::bernoulli(const Tensor&, double, PhiloxState) { KILN_PENDING("bernoulli"); }
// ---- end index and random ------------------------------------------------------------------

}  // namespace kiln::cuda
