// `kiln info`: what this Kiln is (version, build type, compiler, Eigen, OpenMP, the
// instruction set it uses, the CUDA backend and its architectures) and what it runs on
// (the CPU's extensions, CUDA runtime and driver, cuBLAS, cuDNN, NCCL, each GPU), from
// kiln/build_info.h.
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

// "CPU instruction set: KILN_CPU_ARCH=native, uses avx2 fma ...", then what this CPU has
// beyond that (worth a rebuild) or lacks (Kiln cannot run here).
void format_cpu(std::ostream& os, const BuildInfo& build) {
  std::string used, unused, missing;
  for (const CpuFeature& feature : build.cpu_features) {
    if (feature.built) used += " " + feature.name;
    if (feature.supported && !feature.built) unused += " " + feature.name;
    if (feature.built && !feature.supported) missing += " " + feature.name;
  }
  os << "CPU instruction set: KILN_CPU_ARCH=" << build.cpu_arch << ", uses" << (used.empty() ? " baseline only" : used)
     << "\n";
  if (!unused.empty()) os << "  this CPU also has" << unused << " (a build with -DKILN_CPU_ARCH=native uses them)\n";
  if (!missing.empty()) os << "  this CPU lacks" << missing << ": this build cannot run here\n";
}

}  // namespace

std::string format_info(const BuildInfo& build, const CudaInfo& cuda) {
  std::ostringstream os;
  os << "Kiln " << build.version << "\n"
     << "build: " << build.build_type << ", " << build.compiler << ", C++20\n"
     << "CPU backend: Eigen " << build.eigen_version << ", OpenMP " << build.openmp_version << " ("
     << build.openmp_threads << " threads, waiting with " << build.openmp_spins << "), oneDNN "
     << build.onednn_version << " (convolutions)\n";
  format_cpu(os, build);
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
