// Batch normalisation with PyTorch's semantics, built from the backend's batch-norm
// pieces (Note [Batch norm pieces] in core/backend.h).
//
// Training: normalise with the batch's mean and biased variance over N and the spatial
// dims, and update running_mean / running_var in place (when defined) with
// running = (1 - momentum) running + momentum batch, using the unbiased variance.
// Eval: normalise with the running statistics. eps is added to the variance.
// Gradient: input (fused backward-reduce + backward-input kernels), weight, bias.
// batch_norm_relu is relu(batch_norm(...)) in the same kernels, batch_norm_add_relu
// relu(batch_norm(...) + residual).
// Mixed precision: a float16/bfloat16 input may come with float32 weight, bias and
// running statistics; statistics are computed in float32 and the output has the input's
// dtype (as cuDNN's mixed batch norm in PyTorch). So autocast leaves batch_norm alone: it
// is on neither autocast list (core/autocast.h) and casts nothing.
#pragma once

#include "core/tensor.h"

namespace kiln {

// input [N, C, *]; running_mean, running_var, weight, bias [C] or undefined (eval needs
// the running statistics; affine = false leaves weight and bias undefined).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

// relu(batch_norm(...)) fused: the same values and gradients (to the order of the
// per-channel sums; Note [Batch norm with ReLU] in core/backend.h) with one kernel fewer
// each way: forward skips relu's read and write
// of the activation, backward its two reads and a write (the mask is recomputed from the
// saved input, so no output is saved or read).
// The layer: nn::BatchNorm3d with .relu = true.
Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                       double eps = 1e-5);

// relu(batch_norm(input, ...) + residual) fused, the tail of a ResNet block (Note [Batch
// norm, add and ReLU] in core/backend.h): forward is the statistics and one pass reading
// input and residual and writing the output (bn, add and relu apart write and read two
// more activations); backward one reduction that also writes the masked gradient (the
// residual's, and the one the input pass reads) instead of relu's and bn's separate
// passes. The residual has the input's shape, dtype and device; any layout (it is read in
// the input's). Values equal the unfused composition's up to bn's output not being rounded
// to the input dtype before the add; gradients flow to input, weight, bias and residual.
// The layer: nn::BatchNorm3d::forward_add_relu.
Tensor batch_norm_add_relu(const Tensor& input, const Tensor& residual, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                           double momentum = 0.1, double eps = 1e-5);

}  // namespace kiln
