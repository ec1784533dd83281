// Multi-tensor ops: the public entry to the Backend's fused list kernels (Note
// [Multi-tensor kernels] in core/backend.h). optim/ builds its optimizers, gradient
// clipping and GradScaler on these; a user rarely calls them directly.
//
// Each function checks its lists (equal lengths, one device, matching numel and dtypes,
// contiguous, floating point; a clear kiln::Error naming the op and the offending index
// otherwise), drops empty tensors, runs with autograd off, and makes one backend call
// (on CUDA: one or a few launches for the whole list). Callers group their tensors by
// device (and, for the optimizer steps, by dtype) first.
//
// Note [Step counters on the device]: Adam's bias correction needs each parameter's step
// number. PyTorch's fused optimizers keep it in a Float32 [] tensor on the parameter's
// device, and so do we: then GradScaler can skip a step on the device (amp.found_inf)
// with no host sync, and the counters stay right, because increment_steps_ adds 1 only
// when found_inf is zero. An optimizer calls increment_steps_ and then its step kernel:
// two launches per step and (device, dtype), whatever the number of parameters.
#pragma once

#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace kiln {

using AmpStepArgs = Backend::AmpStepArgs;
using SgdStepParams = Backend::SgdStepParams;
using AdamStepParams = Backend::AdamStepParams;
using RmspropStepParams = Backend::RmspropStepParams;

// In-place optimizer updates of `params` (and their state lists); see core/backend.h for
// the formulas' options. Lists that must be empty in a configuration (no momentum, no
// amsgrad, not centered) are checked to be.
void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const SgdStepParams& options,
               const AmpStepArgs& amp = {});
void adam_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                const AdamStepParams& options, const AmpStepArgs& amp = {});
void rmsprop_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                   const std::vector<Tensor>& grad_avgs, const RmspropStepParams& options,
                   const AmpStepArgs& amp = {});
// steps[i] += 1 (Float32 [] tensors), unless found_inf is defined and non-zero.
void increment_steps_(const std::vector<Tensor>& steps, const Tensor& found_inf = Tensor());

// dst[i] = src[i] * scale; dst empty = check only; found_inf (Float32 [1]) set to 1 when a
// src element is Inf/NaN. scale: Float32 [1] or undefined (= 1).
void multi_tensor_scale_(const std::vector<Tensor>& src, const std::vector<Tensor>& dst,
                         const Tensor& scale = Tensor(), const Tensor& found_inf = Tensor());
// The p-norm (p > 0 or INFINITY) of all elements of `tensors` as one vector: a Float32 []
// tensor on their device (Float64 [] when every tensor is float64). An empty list gives 0
// on the CPU.
Tensor multi_tensor_norm(const std::vector<Tensor>& tensors, double p = 2.0);

// GradScaler's on-device scale update (core/backend.h, Backend::amp_update_scale): a
// backoff gives max(scale * backoff_factor, min_scale). min_scale: finite, >= 0.
void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                       double growth_factor, double backoff_factor, int64_t growth_interval,
                       double min_scale);

}  // namespace kiln
