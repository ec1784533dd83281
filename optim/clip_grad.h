// Gradient clipping, as torch.nn.utils.clip_grad_norm_ and clip_grad_value_.
//
// clip_grad_norm_ rescales every gradient by one coefficient so that their joint norm is
// at most max_norm. The whole computation stays on the device (Note [Clipping without a
// host sync] in clip_grad.cpp): one fused norm per device (multi_tensor_norm), the norm
// of those norms, the coefficient as a tensor, and one fused in-place scale per device
// (multi_tensor_scale_). Parameters without a gradient are skipped.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln::optim {

// Scales the gradients of `params` in place by min(1, max_norm / (total_norm + 1e-6)),
// where total_norm is the norm_type-norm (p > 0, or INFINITY) of all gradients taken as
// one vector. Returns total_norm: a [] tensor on the first gradient's device (float32, or
// float64 when every gradient is float64; a float32 0 on the CPU when no parameter has a
// gradient). error_if_nonfinite: throws when total_norm is NaN or Inf (one host sync to
// read it); otherwise a non-finite norm makes the gradients non-finite too, as PyTorch.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient of `params` to [-clip_value, clip_value] in place (clip_value >= 0).
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace kiln::optim
