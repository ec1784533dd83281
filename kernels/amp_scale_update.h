// GradScaler's loss-scale update for one step, written once for both backends: the CPU's
// CpuBackend::amp_update_scale (kernels/cpu/multi_tensor_amp.cpp) and the one-thread CUDA
// kernel (kernels/cuda/amp_update_scale.cu) call it on their three scalars, so both
// devices follow the same scale sequence bit for bit.
//
// Math (PyTorch's _amp_update_scale_, plus a floor):
//   found_inf:  scale = max(scale * backoff_factor, min_scale);  growth_tracker = 0
//   otherwise:  growth_tracker += 1; when it reaches growth_interval:
//                 scale *= growth_factor unless that overflows to inf;
//                 growth_tracker = 0
// Products are taken in double and rounded to float (as PyTorch's CPU kernel), so the
// sequence is the same for any factor on either device. Note [GradScaler min_scale] in
// optim/grad_scaler.h says why the floor exists and why its default is 2^-24.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln::amp {

KILN_HOST_DEVICE inline void update_scale(float& scale, int32_t& growth_tracker, bool found_inf,
                                          double growth_factor, double backoff_factor,
                                          int64_t growth_interval, double min_scale) {
  if (found_inf) {
    const double backed_off = static_cast<double>(scale) * backoff_factor;
    scale = static_cast<float>(backed_off < min_scale ? min_scale : backed_off);
    growth_tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(growth_tracker) + 1;  // this step succeeded
  if (successful != growth_interval) {
    growth_tracker = static_cast<int32_t>(successful);
    return;
  }
  const float grown = static_cast<float>(static_cast<double>(scale) * growth_factor);
  if (std::isfinite(grown)) scale = grown;  // never grow past float32's range to inf
  growth_tracker = 0;
}

}  // namespace kiln::amp
