// cuBLAS, loaded the first time Kiln calls it.
//
// Note [cuBLAS loaded on first use]: linked the usual way, libcublas.so and the 540 MB
// libcublasLt.so it needs are mapped and relocated when the program starts, so any program
// of a CUDA build, even one that never touches a GPU, carried about 150 MB more resident
// memory (bench/results/2026-11-25-cpu-train-step.md). Kiln does not link cuBLAS at all:
// this file defines the few cuBLAS functions Kiln calls (same names and signatures as
// cublas_api.h, which the compiler checks against these definitions), and each forwards to
// the real one, looked up in the library loaded on the first call (LibraryOnFirstUse,
// core/library_on_first_use.h): first the file the build found (KILN_CUBLAS_PATH), then the
// soname through the loader's search path (KILN_CUBLAS_SONAME, e.g. libcublas.so.13).
// Failing that, the call throws a kiln::Error saying which library could not be loaded and
// why. cuDNN needs none of this: its libcudnn.so is already a small front that loads its
// engines on demand.
#include <cublas_v2.h>

#include "core/library_on_first_use.h"

#if !defined(KILN_CUBLAS_PATH) || !defined(KILN_CUBLAS_SONAME)
#error "KILN_CUBLAS_PATH and KILN_CUBLAS_SONAME must be defined by the build (kernels/cuda/CMakeLists.txt)"
#endif

namespace kiln::cuda {
namespace {

template <typename Fn>
Fn cublas_symbol(const char* name) {
  static LibraryOnFirstUse cublas("cuBLAS", KILN_CUBLAS_PATH, KILN_CUBLAS_SONAME);
  return reinterpret_cast<Fn>(cublas.symbol(name));
}

}  // namespace
}  // namespace kiln::cuda

// The symbol's name after cublas_v2.h's macros (cublasCreate is cublasCreate_v2).
#define KILN_CUBLAS_NAME_(name) #name
#define KILN_CUBLAS_NAME(name) KILN_CUBLAS_NAME_(name)
// Resolves the real function once per process, then forwards the call. The _AS form names
// the pointer type, for a function cublas_api.h also overloads for C++ (decltype(&name)
// would be ambiguous).
#define KILN_CUBLAS_FORWARD_AS(type, name, ...)                                       \
  static const auto real = ::kiln::cuda::cublas_symbol<type>(KILN_CUBLAS_NAME(name)); \
  return real(__VA_ARGS__)
#define KILN_CUBLAS_FORWARD(name, ...) KILN_CUBLAS_FORWARD_AS(decltype(&name), name, __VA_ARGS__)

extern "C" {

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  KILN_CUBLAS_FORWARD(cublasGetStatusName, status);
}
const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  KILN_CUBLAS_FORWARD(cublasGetStatusString, status);
}
cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int* value) {
  KILN_CUBLAS_FORWARD(cublasGetProperty, type, value);
}
cublasStatus_t CUBLASWINAPI cublasCreate(cublasHandle_t* handle) {
  KILN_CUBLAS_FORWARD(cublasCreate, handle);
}
cublasStatus_t CUBLASWINAPI cublasDestroy(cublasHandle_t handle) {
  KILN_CUBLAS_FORWARD(cublasDestroy, handle);
}
cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  KILN_CUBLAS_FORWARD(cublasSetMathMode, handle, mode);
}
cublasStatus_t CUBLASWINAPI cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  KILN_CUBLAS_FORWARD(cublasSetStream, handle, stream);
}
cublasStatus_t CUBLASWINAPI cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  KILN_CUBLAS_FORWARD(cublasSetWorkspace, handle, workspace, bytes);
}
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                                int, int, const void*, const void*, cudaDataType, int,
                                                long long int, const void*, cudaDataType, int, long long int,
                                                const void*, void*, cudaDataType, int, long long int, int,
                                                cublasComputeType_t, cublasGemmAlgo_t);
cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType a_type, int lda, long long int stride_a, const void* b,
    cudaDataType b_type, int ldb, long long int stride_b, const void* beta, void* c, cudaDataType c_type,
    int ldc, long long int stride_c, int batch_count, cublasComputeType_t compute_type,
    cublasGemmAlgo_t algo) {
  KILN_CUBLAS_FORWARD_AS(GemmStridedBatchedEx, cublasGemmStridedBatchedEx, handle, transa, transb, m, n, k,
                         alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c, c_type, ldc,
                         stride_c, batch_count, compute_type, algo);
}

}  // extern "C"
