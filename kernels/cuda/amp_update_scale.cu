// CudaBackend::amp_update_scale: GradScaler's loss-scale update on the device (PyTorch's
// _amp_update_scale_), so that a training step never waits for the GPU to decide whether
// the step was skipped (core/backend.h).
//
// Math: kernels/amp_scale_update.h (shared with the CPU backend, so both devices follow
// the same scale sequence), on scale (Float32 [1]), growth_tracker (Int32 [1]) and
// found_inf (Float32 [1]); a backoff never takes the scale below min_scale.
//
// Launch shape: one thread (three scalars; the kernel exists so the values stay on the
// device). Current stream, no host sync.
#include <cstdint>

#include "kernels/amp_scale_update.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"

namespace kiln::cuda {
namespace {

// ==== kernels ===================================================================================

__global__ void amp_update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                        double growth_factor, double backoff_factor, int64_t growth_interval,
                                        double min_scale) {
  amp::update_scale(*scale, *growth_tracker, *found_inf != 0.0f, growth_factor, backoff_factor,
                    growth_interval, min_scale);
}

}  // namespace

// ==== launchers =================================================================================

void CudaBackend::amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                   double growth_factor, double backoff_factor, int64_t growth_interval,
                                   double min_scale) {
  KILN_ASSERT(scale.dtype() == DType::Float32 && growth_tracker.dtype() == DType::Int32 &&
                  found_inf.dtype() == DType::Float32 && scale.numel() == 1 && growth_tracker.numel() == 1 &&
                  found_inf.numel() == 1,
              "amp_update_scale: scale ", scale.dtype(), " ", scale.sizes(), ", growth_tracker ",
              growth_tracker.dtype(), " ", growth_tracker.sizes(), ", found_inf ", found_inf.dtype(), " ",
              found_inf.sizes());
  const int device = scale.device().index;
  const OnDevice on(device);
  amp_update_scale_kernel<<<1, 1, 0, on.stream.handle()>>>(
      static_cast<float*>(scale.data_ptr()), static_cast<int32_t*>(growth_tracker.data_ptr()),
      static_cast<const float*>(found_inf.data_ptr()), growth_factor, backoff_factor, growth_interval,
      min_scale);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
