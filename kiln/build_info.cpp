// build_info() from compile definitions set in kiln/CMakeLists.txt, and cuda_info()
// from the CUDA backend's runtime queries (kernels/cuda/runtime.h, cuda_info.h).
#include "kiln/build_info.h"
#include "kiln/openmp_waits.h"

#include <omp.h>

#include <string>

#include "kernels/cpu/conv_onednn.h"

#if defined(KILN_WITH_CUDA)
#include "kernels/cuda/cuda_info.h"
#include "kernels/cuda/runtime.h"
#endif

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build (kiln/CMakeLists.txt)"
#endif

namespace kiln {

BuildInfo build_info() {
  BuildInfo info;
  info.version = KILN_VERSION;
  info.build_type = KILN_BUILD_TYPE;
  info.compiler = KILN_CXX_COMPILER;
  info.eigen_version = KILN_EIGEN_VERSION;
  info.openmp_version = std::to_string(_OPENMP);
  info.openmp_threads = omp_get_max_threads();
  info.openmp_spins = openmp_spins();
  info.onednn_version = cpu::onednn::version();
  info.cpu_arch = cpu_arch();
  info.cpu_features = cpu_features();
#if defined(KILN_WITH_CUDA)
  info.cuda_built = true;
  info.cuda_architectures = KILN_CUDA_ARCHITECTURES;
  info.cuda_compiler = KILN_CUDA_COMPILER;
#endif
  return info;
}

#if defined(KILN_WITH_CUDA)
namespace {

// CUDA encodes versions as 1000 * major + 10 * minor: 13000 -> "13.0".
std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

CudaInfo cuda_info() {
  CudaInfo info;
  info.built = true;
  info.runtime_version = cuda_version_string(cuda::runtime_version());
  info.driver_version = cuda_version_string(cuda::driver_version());
  info.cublas_version = cuda::cublas_version();
  info.cudnn_version = cuda::cudnn_version();
  info.nccl_version = cuda::nccl_version();
  const int count = cuda::device_count(&info.unavailable_reason);
  info.available = count > 0;
  for (int i = 0; i < count; ++i) {
    const cuda::DeviceProperties& p = cuda::device_properties(i);
    info.devices.push_back({.index = i, .name = p.name, .major = p.major, .minor = p.minor,
                            .total_memory = p.total_memory, .multiprocessors = p.multiprocessors});
  }
  return info;
}
#else
CudaInfo cuda_info() {
  CudaInfo info;
  info.unavailable_reason = "this build has no CUDA backend (configured with KILN_CUDA=OFF or without a CUDA toolkit)";
  info.cudnn_version = "not built";
  info.nccl_version = "not built";
  return info;
}
#endif

}  // namespace kiln
