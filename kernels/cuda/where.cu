// CudaBackend::where: out = cond ? a : b through the elementwise engine (elementwise.cuh),
// with four operands: out, cond (Bool), a, b (one dtype, any of the eight).
#include "core/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/elementwise_functors.h"

namespace kiln::cuda {

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const StridedLoop loop = make_strided_loop({&out, &cond, &a, &b});
  visit_dtype<kAllTypes>(a.dtype(), "where", [&]<typename T>() {
    run_elementwise<T, bool, T, T>(loop, out.device().index, functors::Where<opmath_t<T>>{});
  });
}

}  // namespace kiln::cuda
