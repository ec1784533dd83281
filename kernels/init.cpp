// Registers CpuBackend (always); with a CUDA build, asks the CUDA runtime what GPUs exist
// so that using Device::cuda() explains why it is unavailable.
#include "kernels/init.h"

#include <mutex>
#include <string>

#include "core/backend.h"
#include "kernels/cpu/cpu_backend.h"
#if defined(KILN_WITH_CUDA)
#include "kernels/cuda/runtime.h"
#endif

namespace kiln {

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    static cpu::CpuBackend cpu_backend;
    register_backend(DeviceType::CPU, &cpu_backend);
#if defined(KILN_WITH_CUDA)
    std::string reason;
    const int gpus = cuda::device_count(&reason);
    if (gpus > 0) {
      reason = "found " + std::to_string(gpus) +
               " GPU(s), but this build has no CUDA kernels yet (they come with the CUDA backend)";
    }
    set_cuda_unavailable_reason(reason);
#endif
  });
}

}  // namespace kiln
