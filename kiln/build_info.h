// What this build of Kiln is and what it runs on: the facts `kiln info` prints.
//
// build_info() is fixed at compile time (version, build type, compiler, Eigen, which
// backends were built, the instruction set) plus the OpenMP thread count and which of
// the instruction-set extensions this CPU has. cuda_info() asks the CUDA runtime
// and libraries at run time (kernels/cuda/cuda_info.h); in a build without CUDA, or on a
// machine without a driver or GPU, it says so instead of failing. Lives in kiln/, beside
// init(), because core knows nothing of backends.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kiln/cpu_features.h"

namespace kiln {

struct BuildInfo {
  std::string version;             // the CMake project version, "0.1.0"
  std::string build_type;          // "Release", "Debug", ...
  std::string compiler;            // "GNU 13.2.0"
  std::string eigen_version;       // "3.4.0"
  std::string openmp_version;      // the _OPENMP date, "201511"
  int openmp_threads = 0;          // omp_get_max_threads()
  std::string openmp_spins;        // how OpenMP threads wait (Note [OpenMP under load] in kiln/openmp_waits.h)
  std::string onednn_version;      // "2.6.3" (CPU convolutions), or "not built"
  bool cuda_built = false;         // the CUDA backend is compiled in
  std::string cuda_architectures;  // CMAKE_CUDA_ARCHITECTURES, "90"
  std::string cuda_compiler;       // "NVIDIA 13.0.88"
  std::string cpu_arch;            // KILN_CPU_ARCH: "native", "x86-64-v3" (Note [Instruction set])
  std::vector<CpuFeature> cpu_features;  // built for / supported here, cpu_features()
};
BuildInfo build_info();

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  size_t total_memory = 0;   // bytes
  int multiprocessors = 0;
};

struct CudaInfo {
  bool built = false;             // same as BuildInfo::cuda_built
  bool available = false;         // a driver and at least one GPU
  std::string unavailable_reason; // why not, when built but not available
  std::string runtime_version;    // "13.0"
  std::string driver_version;     // "13.0", or "none"
  std::string cublas_version;     // "13.0.2"
  std::string cudnn_version;      // "9.13.0", or "not built"
  std::string nccl_version;       // "2.27.7", or "not built"
  std::vector<CudaDeviceInfo> devices;
};
CudaInfo cuda_info();

}  // namespace kiln
