// Transposed convolution over 1, 2 or 3 spatial dims, channels first: `conv_transpose` and
// the conv_transpose1d/2d/3d front doors, with PyTorch's arguments and their order
// (stride, padding, output_padding, groups, dilation). Often called "deconvolution": it
// is the gradient of a convolution with respect to its input, so it maps each input voxel
// to a k^3 window of the output, upsampling by the stride (MedicalNet's segmentation head,
// U-Net decoders).
//
// Note [Transposed convolution as a convolution's gradient]: a transposed convolution of x
// with weight W is exactly the backward-input pass of the convolution whose weight is W
// (read as [C_out_conv = C_in, C_in_conv / groups = C_out / groups, k...]) and whose output
// has x's shape. So the op needs no kernels of its own: forward is the backend's
// conv_backward_input (CPU: the GEMM + col2vol of kernels/cpu/conv.cpp; CUDA: cuDNN's
// backward-data), its input gradient is the backend's conv_forward of grad_out, and its
// weight gradient is conv_backward_weight with the roles of input and grad_out swapped.
// The output size per dim is
//     o = (i - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1,
// and output_padding < stride makes the convolution of an o-sized input give back i, so the
// backend's passes see consistent shapes. PyTorch also accepts stride <= output_padding <
// dilation; those rows are computed without padding (the full output) and cropped, with
// zeros appended where the output runs past it (autograd through narrow and cat).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// input [N, C_in, s...] (or unbatched [C_in, s...]), weight [C_in, C_out / groups, k...],
// bias [C_out] or undefined. Returns [N, C_out, o...] (o above).
Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                      const std::vector<int64_t>& output_padding, int64_t groups,
                      const std::vector<int64_t>& dilation);

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
                        const std::vector<int64_t>& output_padding = {0}, int64_t groups = 1,
                        const std::vector<int64_t>& dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
                        const std::vector<int64_t>& output_padding = {0}, int64_t groups = 1,
                        const std::vector<int64_t>& dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
                        const std::vector<int64_t>& output_padding = {0}, int64_t groups = 1,
                        const std::vector<int64_t>& dilation = {1});

// The output size along one spatial dim, (input - 1) stride - 2 padding + dilation
// (kernel - 1) + output_padding + 1, computed with overflow checks: nullopt when a step
// does not fit int64. It may be 0 or less (the op refuses that); nn::ConvTransposeNd's
// forward(input, output_size) derives its output_padding from it.
std::optional<int64_t> conv_transpose_output_size(int64_t input, int64_t kernel, int64_t stride,
                                                  int64_t padding, int64_t dilation, int64_t output_padding);

}  // namespace kiln
