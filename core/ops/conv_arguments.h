// What convolution (core/ops/conv.h) and transposed convolution (core/ops/
// conv_transpose.h) share: argument checks (one value per spatial dim, operand dtypes and
// devices, the batched/unbatched input), the per-channel bias added to an output and its
// gradient (grad_out summed over the batch and spatial dims), and the pass itself with
// the backward node that runs the backend's convolution passes for either.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace kiln::conv_arguments {

// One value per spatial dim: a single value is repeated for every dim.
Dims per_spatial_dim(const std::vector<int64_t>& values, int64_t spatial, const char* op, const char* what);

// Input and weight defined, of one floating dtype and one device; bias undefined or a
// [c_out] tensor of the same dtype and device.
void check_operands(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    int64_t c_out);

// The number of spatial dims (1-3): `spatial` for a front door, or the weight's for 0.
// Checks the weight's and input's ranks; `batched` says whether the input has N.
int64_t spatial_rank(const char* op, const Tensor& input, const Tensor& weight, int64_t spatial,
                     bool& batched);

// The ConvParams of an op's arguments, one value per spatial dim, checked: positive stride
// and dilation, non-negative padding.
ConvParams make_params(const char* op, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                       int64_t groups, int64_t spatial);

// Every size of the input past N, and every size of the weight, positive.
void check_nonempty(const char* op, const Tensor& input, const Tensor& weight);

// out [N, C, s...] += bias [C] (in place, no autograd: the caller records the node).
void add_channel_bias(Tensor& out, const Tensor& bias);

// The bias's gradient: grad_out [N, C, s...] summed to [C].
Tensor channel_bias_grad(const Tensor& grad_out);

// Note [Convolution memory format]: a convolution computes in channels-last when its
// input or its weight is laid out channels-last (PyTorch's rule for cuDNN and oneDNN), or
// when its weight is both layouts at once but has exactly the channels-last strides (a
// converted model's [C_out, 1, k...] stem: PyTorch would run that one in NCDHW and convert
// back and forth), else row-major. Its operands are made dense in that format (no copy when they already
// are), its output and every gradient it returns are laid out in it: a channels-last
// network stays channels-last from layer to layer, forward and backward.
MemoryFormat conv_memory_format(const Tensor& x, const Tensor& weight);

// out [out_sizes] = conv(x, W) + b, or conv_transpose(x, W) + b, by the backend's pass
// (forward, or backward-input: Note [Transposed convolution as a convolution's gradient]
// in core/ops/conv_transpose.h) on operands dense in conv_memory_format(x, W), with its
// backward node recorded:
//                 convolution                        transposed
//   dx   backward_input(dy, W)                forward(dy, W)
//   dW   backward_weight(dy, input = x)       backward_weight(grad_out = x, input = dy)
//   db   dy summed over N and space           the same
// The node saves W only when x needs a gradient and x only when W does.
Tensor convolve(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                const ConvParams& params, Dims out_sizes, bool transposed);

}  // namespace kiln::conv_arguments
