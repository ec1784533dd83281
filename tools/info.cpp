// `kiln info`: what this Kiln is (version, build type, compiler, Eigen, OpenMP, the CUDA
// backend and its architectures) and what it runs on (CUDA runtime and driver, cuBLAS,
// cuDNN, NCCL, each GPU), from kiln/build_info.h.
#include <iomanip>
#include <sstream>

#include "tools/cli.h"

namespace kiln::tools {
namespace {

void format_cuda(std::ostream& os, const CudaInfo& cuda) {
  os << "  runtime " << cuda.runtime_version << ", driver " << cuda.driver_version << "\n"
     << "  cuBLAS " << cuda.cublas_version << "\n"
     << "  cuDNN " << cuda.cudnn_version << "\n"
     << "  NCCL " << cuda.nccl_version << "\n";
  if (!cuda.available) {
    os << "CUDA not available: " << cuda.unavailable_reason << "\n";
    return;
  }
  os << "devices: " << cuda.devices.size() << "\n";
  for (const CudaDeviceInfo& device : cuda.devices) {
    os << "  cuda:" << device.index << "  " << device.name << ", compute capability " << device.major
       << "." << device.minor << ", " << human_bytes(static_cast<int64_t>(device.total_memory)) << ", "
       << device.multiprocessors << " SMs\n";
  }
}

}  // namespace

std::string format_info(const BuildInfo& build, const CudaInfo& cuda) {
  std::ostringstream os;
  os << "Kiln " << build.version << "\n"
     << "build: " << build.build_type << ", " << build.compiler << ", C++20\n"
     << "CPU backend: Eigen " << build.eigen_version << ", OpenMP " << build.openmp_version << " ("
     << build.openmp_threads << " threads)\n";
  if (!build.cuda_built) {
    os << "CUDA backend: not built\n"
       << "CUDA not available: " << cuda.unavailable_reason << "\n";
    return os.str();
  }
  os << "CUDA backend: built for architectures " << build.cuda_architectures << " with "
     << build.cuda_compiler << "\n";
  format_cuda(os, cuda);
  return os.str();
}

int run_info(const std::vector<std::string>& args, std::ostream& out) {
  if (!args.empty()) throw UsageError("takes no arguments, got '" + args[0] + "'");
  out << format_info(build_info(), cuda_info());
  return 0;
}

}  // namespace kiln::tools
