// Versions of the CUDA libraries the backend was built with, for `kiln info`
// (kiln/build_info.h). Each query is one function, so whoever links a library
// (cuDNN: KILN_WITH_CUDNN, NCCL: KILN_WITH_NCCL) only has to define its macro for
// kiln_cuda. None of them needs a GPU.
#pragma once

#include <string>

namespace kiln::cuda {

// "13.0.2" from cublasGetProperty.
std::string cublas_version();
// cudnnGetVersion() as "9.13.0" when built with cuDNN, else "not built".
std::string cudnn_version();
// NCCL's compile-time version from nccl.h when built with NCCL, else "not built".
std::string nccl_version();

}  // namespace kiln::cuda
