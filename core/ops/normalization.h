// Normalisation over other groups of elements than batch norm's, with PyTorch's semantics
// (F.layer_norm, F.group_norm, F.instance_norm), as composites of var_mean and
// elementwise ops, so their gradients come from autograd and they run on every backend.
// The variance is the biased one (correction 0), eps is added to it, and the optional
// affine weight and bias are applied after normalising:
//   layer_norm     over the trailing dims named by normalized_shape; weight and bias have
//                  that shape (MONAI's and transformers' LayerNorm).
//   group_norm     input [N, C, *]: the C channels split into num_groups groups, each
//                  normalised over its channels and the spatial dims; weight, bias [C].
//   instance_norm  input [N, C, *]: each (sample, channel) over its spatial dims (MONAI's
//                  3D networks); with running statistics (track_running_stats), training
//                  updates them with the instances' mean and unbiased variance averaged
//                  over the batch, and eval (use_input_stats = false) normalises with them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln {

Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape,
                  const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

Tensor instance_norm(const Tensor& input, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);

}  // namespace kiln
