// Checks that this CPU has the instructions the build uses (Note [Instruction set],
// kiln/cpu_features.h), then registers CpuBackend (always) and, in a CUDA build on a
// machine with a driver and a GPU, CudaBackend (which also answers kiln::cudnn's algorithm cache calls, core/cudnn.h).
// Without one, Device::cuda() stays unregistered and using it explains why (the reason
// the CUDA runtime gave).
#include "kiln/init.h"

#include <mutex>
#include <string>

#include "core/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kiln/cpu_features.h"
#if defined(KILN_WITH_CUDA)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"
#endif

namespace kiln {

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    check_cpu_supports_build(cpu_features(), cpu_arch());  // Note [Instruction set]
    static cpu::CpuBackend cpu_backend;
    register_backend(DeviceType::CPU, &cpu_backend);
#if defined(KILN_WITH_CUDA)
    std::string reason;
    if (cuda::device_count(&reason) > 0) {
      static cuda::CudaBackend cuda_backend;
      register_backend(DeviceType::CUDA, &cuda_backend);
    } else {
      set_cuda_unavailable_reason(reason);
    }
#endif
  });
}

}  // namespace kiln
