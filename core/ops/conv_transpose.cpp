// conv_transpose and conv_transpose1d/2d/3d: argument checks, the output size, and the
// forward and backward passes as the backend's convolution passes with the roles swapped
// (Note [Transposed convolution as a convolution's gradient] in conv_transpose.h; the
// backward node is convolution's, conv_arguments.h). Under autocast the operands are cast
// to the autocast dtype first, as for convolution.
#include "core/ops/conv_transpose.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/autocast.h"
#include "core/checked_math.h"
#include "core/ops/conv_arguments.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/shape.h"

namespace kiln {
namespace {

// ---- argument checks --------------------------------------------------------------------

// A batched input [N, C_in, s...] and weight [C_in, C_out / groups, k...].
void check_channels(const char* op, const Tensor& input, const Tensor& weight, int64_t groups) {
  conv_arguments::check_nonempty(op, input, weight);
  KILN_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  KILN_CHECK(weight.size(0) == input.size(1), op, ": weight shape ", weight.sizes(),
             " expects C_in = ", weight.size(0), " input channels, but the input (shape ", input.sizes(),
             ") has ", input.size(1),
             ". Hint: a transposed convolution's weight is [C_in, C_out / groups, k...]");
  KILN_CHECK(input.size(1) % groups == 0, op, ": input channels C_in = ", input.size(1), " (input shape ",
             input.sizes(), ") must be divisible by groups = ", groups);
}

// output_padding >= 0 and smaller than the stride or the dilation (PyTorch's rule: beyond
// both, the appended rows could never be reached by any input voxel).
void check_output_padding(const char* op, const std::vector<int64_t>& output_padding,
                          const ConvParams& params) {
  for (size_t i = 0; i < output_padding.size(); ++i) {
    KILN_CHECK(output_padding[i] >= 0, op, ": output_padding must be non-negative, got ", output_padding);
    KILN_CHECK(output_padding[i] < params.stride[i] || output_padding[i] < params.dilation[i], op,
               ": output_padding ", output_padding, " must be smaller than either the stride ", params.stride,
               " or the dilation ", params.dilation, " along spatial dim ", i);
  }
}

// [N, C_out, o...] with o = (i - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1.
std::vector<int64_t> output_sizes(const char* op, const Tensor& input, const Tensor& weight,
                                  const ConvParams& params, const std::vector<int64_t>& output_padding) {
  const std::optional<int64_t> c_out = checked_mul(weight.size(1), params.groups);
  KILN_CHECK(c_out, op, ": C_out = weight.size(1) x groups overflows int64 (weight shape ", weight.sizes(),
             ", groups ", params.groups, ")");
  std::vector<int64_t> sizes = {input.size(0), *c_out};
  for (size_t i = 0; i < params.stride.size(); ++i) {
    const int64_t d = static_cast<int64_t>(i) + 2;
    // The parameters are user numbers: every intermediate is checked (Note [Checked sizes]).
    const std::optional<int64_t> size =
        conv_transpose_output_size(input.size(d), weight.size(d), params.stride[i], params.padding[i],
                                   params.dilation[i], output_padding[i]);
    KILN_CHECK(size, op, ": the output size overflows int64 along spatial dim ", i, " (input shape ",
               input.sizes(), ", weight shape ", weight.sizes(), ", stride ", params.stride, ", dilation ",
               params.dilation, ", padding ", params.padding, ")");
    KILN_CHECK(*size > 0, op, ": the output would be empty along spatial dim ", i, ": (", input.size(d),
               " - 1) x stride ", params.stride[i], " - 2 x padding ", params.padding[i], " + dilation ",
               params.dilation[i], " x (", weight.size(d), " - 1) + output_padding ", output_padding[i],
               " + 1 = ", *size, " (input shape ", input.sizes(), ", weight shape ", weight.sizes(), ")");
    sizes.push_back(*size);
  }
  return sizes;
}

// ---- the op -----------------------------------------------------------------------------

// stride <= output_padding < dilation somewhere: the full output (no padding), cropped by
// `padding` on each side, zeros appended where the requested size runs past it.
Tensor conv_transpose_cropped(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                              ConvParams params, const std::vector<int64_t>& out_sizes) {
  const std::vector<int64_t> padding = params.padding;
  std::fill(params.padding.begin(), params.padding.end(), 0);
  const std::vector<int64_t> no_output_padding(padding.size(), 0);
  Tensor out =
      conv_arguments::convolve(op, x, weight, Tensor(), params,
                               output_sizes(op, x, weight, params, no_output_padding), /*transposed=*/true);
  for (size_t i = 0; i < padding.size(); ++i) {
    const int64_t d = static_cast<int64_t>(i) + 2;
    const int64_t kept = std::clamp<int64_t>(out.size(d) - padding[i], 0, out_sizes[d]);
    std::vector<Tensor> pieces;
    if (kept > 0) pieces.push_back(out.narrow(d, padding[i], kept));
    if (kept < out_sizes[d]) {
      std::vector<int64_t> zero_sizes = out.sizes();
      zero_sizes[d] = out_sizes[d] - kept;
      pieces.push_back(zeros(zero_sizes, {.dtype = out.dtype(), .device = out.device()}));
    }
    out = pieces.size() == 1 ? pieces[0] : cat(pieces, d);
  }
  if (!bias.defined()) return out.contiguous(out.suggest_memory_format());  // keeps a channels-last result so
  std::vector<int64_t> bias_shape(out_sizes.size() - 1, 1);  // [C_out, 1, ...]
  bias_shape[0] = bias.size(0);
  return add(out, bias.reshape(bias_shape));  // differentiable: not add_channel_bias
}

// `spatial` = 1, 2 or 3 for the front doors; 0 = as many as the weight has.
Tensor conv_transpose_impl(const char* op, const Tensor& input_in, const Tensor& weight_in,
                           const Tensor& bias_in, const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& padding, const std::vector<int64_t>& output_padding_in,
                           int64_t groups, const std::vector<int64_t>& dilation, int64_t spatial) {
  const Tensor input = autocast_input(input_in, AutocastPolicy::LowerPrecision);
  const Tensor weight = autocast_input(weight_in, AutocastPolicy::LowerPrecision);
  const Tensor bias = autocast_input(bias_in, AutocastPolicy::LowerPrecision);
  conv_arguments::check_operands(op, input, weight, Tensor(), 0);
  bool batched = false;
  spatial = conv_arguments::spatial_rank(op, input, weight, spatial, batched);
  // The bias once C_out = weight.size(1) x groups is known (-1 when that overflows: no match).
  conv_arguments::check_operands(op, input, weight, bias, checked_mul(weight.size(1), groups).value_or(-1));
  const Tensor x = batched ? input : input.unsqueeze(0);
  check_channels(op, x, weight, groups);
  const ConvParams params = conv_arguments::make_params(op, stride, padding, dilation, groups, spatial);
  const std::vector<int64_t> output_padding =
      conv_arguments::per_spatial_dim(output_padding_in, spatial, op, "output_padding");
  check_output_padding(op, output_padding, params);
  const std::vector<int64_t> out_sizes = output_sizes(op, x, weight, params, output_padding);
  bool within_stride = true;
  for (size_t i = 0; i < output_padding.size(); ++i) within_stride &= output_padding[i] < params.stride[i];
  // Within the stride the backend's pass gives the output directly.
  const Tensor out = within_stride ? conv_arguments::convolve(op, x, weight, bias, params, out_sizes, true)
                                   : conv_transpose_cropped(op, x, weight, bias, params, out_sizes);
  return batched ? out : out.squeeze(0);
}

}  // namespace

std::optional<int64_t> conv_transpose_output_size(int64_t input, int64_t kernel, int64_t stride,
                                                  int64_t padding, int64_t dilation, int64_t output_padding) {
  const std::optional<int64_t> strided = checked_mul(input - 1, stride);
  const std::optional<int64_t> reach = checked_mul(dilation, kernel - 1);
  const std::optional<int64_t> twice_padding = checked_mul(2, padding);
  std::optional<int64_t> size = strided && reach ? checked_add(*strided, *reach) : std::nullopt;
  if (size) size = checked_add(*size, output_padding + 1);
  if (!size || !twice_padding) return std::nullopt;
  return checked_add(*size, -*twice_padding);
}

Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                      const std::vector<int64_t>& output_padding, int64_t groups,
                      const std::vector<int64_t>& dilation) {
  return conv_transpose_impl("conv_transpose", input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 0);
}

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv_transpose_impl("conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 1);
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv_transpose_impl("conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 2);
}

Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv_transpose_impl("conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 3);
}

}  // namespace kiln
