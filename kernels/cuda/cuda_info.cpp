// Library version queries for `kiln info` (kernels/cuda/cuda_info.h). cuBLAS answers
// without a handle or a GPU; cuDNN is reported when the build links it, NCCL (its
// header's version) when kiln_dist has the NCCL backend.
#include "kernels/cuda/cuda_info.h"

#include <cublas_api.h>
#include <library_types.h>

#include "core/error.h"

#if defined(KILN_WITH_CUDNN)
#include <cudnn.h>
#endif
#if defined(KILN_WITH_NCCL)
#include <nccl.h>
#endif

namespace kiln::cuda {

std::string cublas_version() {
  int major = 0, minor = 0, patch = 0;
  try {  // the first cuBLAS call loads the library (Note [cuBLAS loaded on first use])
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
      return "unknown (cublasGetProperty failed)";
    }
  } catch (const Error& error) {
    return std::string("not loadable (") + error.what() + ")";
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cudnn_version() {
#if defined(KILN_WITH_CUDNN)
  // cuDNN 9 encodes 10000 * major + 100 * minor + patch; cuDNN 8 used 1000 * major.
  const size_t version = cudnnGetVersion();
  const size_t scale = version >= 90000 ? 10000 : 1000;
  return std::to_string(version / scale) + "." + std::to_string(version % scale / 100) + "." +
         std::to_string(version % 100);
#else
  return "not built";
#endif
}

std::string nccl_version() {
#if defined(KILN_WITH_NCCL)
  return std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
#else
  return "not built";
#endif
}

}  // namespace kiln::cuda
