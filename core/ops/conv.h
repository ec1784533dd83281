// Convolution over 1, 2 or 3 spatial dims, channels first (Note [Convolution layout] in
// core/backend.h): one N-d op, `convolution`, and the conv1d/conv2d/conv3d front doors.
// Stride, padding and dilation take one value per spatial dim or a single value for all.
// The backend computes the product (CPU: vol2col + GEMM; CUDA: cuDNN); the bias is added
// here. Gradient: the backend's backward-input and backward-weight kernels; the bias's is
// grad_out summed over N and the spatial dims.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// input [N, C_in, s...] (or unbatched [C_in, s...]), weight [C_out, C_in / groups, k...],
// bias [C_out] or undefined. Returns [N, C_out, o...].
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                   const std::vector<int64_t>& dilation, int64_t groups);

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);

}  // namespace kiln
