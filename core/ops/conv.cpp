// convolution and conv1d/conv2d/conv3d: argument checks, the backend's product plus the
// bias, and the backward node that calls the backend's backward-input and backward-weight
// kernels (conv_arguments.h; Note [Convolution layout] in core/backend.h). Under autocast the
// operands are cast to the autocast dtype first (core/autocast.h).
#include "core/ops/conv.h"

#include <optional>
#include <string>

#include "core/autocast.h"
#include "core/checked_math.h"
#include "core/ops/conv_arguments.h"
#include "core/ops/factory.h"

namespace kiln {
namespace {

// ---- argument checks --------------------------------------------------------------------

// Shapes of a batched input [N, C_in, s...] and weight [C_out, C_in / groups, k...].
void check_channels(const char* op, const Tensor& input, const Tensor& weight, int64_t groups) {
  conv_arguments::check_nonempty(op, input, weight);
  KILN_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  const int64_t c_in = input.size(1);
  KILN_CHECK(c_in % groups == 0, op, ": input channels C_in = ", c_in, " (input shape ", input.sizes(),
             ") must be divisible by groups = ", groups);
  KILN_CHECK(weight.size(1) * groups == c_in, op, ": weight shape ", weight.sizes(),
             " with groups = ", groups, " expects C_in = ", weight.size(1) * groups,
             " input channels, but the input (shape ", input.sizes(), ") has ", c_in,
             ". Hint: weight is [C_out, C_in / groups, k...]");
  KILN_CHECK(weight.size(0) % groups == 0, op, ": output channels C_out = ", weight.size(0),
             " (weight shape ", weight.sizes(), ") must be divisible by groups = ", groups);
}

// [N, C_out, o...] with o = (s + 2 padding - dilation (k - 1) - 1) / stride + 1 >= 1.
Dims output_sizes(const char* op, const Tensor& input, const Tensor& weight, const ConvParams& params) {
  Dims sizes = {input.size(0), weight.size(0)};
  const size_t spatial = params.stride.size();
  // The parameters are user numbers: every intermediate is checked (Note [Checked sizes]).
  Dims padded, dilated_kernel;
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t d = static_cast<int64_t>(i) + 2;
    const std::optional<int64_t> twice_padding = checked_mul(2, params.padding[i]);
    const std::optional<int64_t> pad =
        twice_padding ? checked_add(input.size(d), *twice_padding) : std::nullopt;
    const std::optional<int64_t> reach = checked_mul(params.dilation[i], weight.size(d) - 1);
    KILN_CHECK(pad && reach && *reach < INT64_MAX, op, ": padding ", params.padding, " and dilation ",
               params.dilation, " overflow int64 along spatial dim ", i, " (input shape ", input.sizes(),
               ", weight shape ", weight.sizes(), ")");
    padded.push_back(*pad);
    dilated_kernel.push_back(*reach + 1);
  }
  for (size_t i = 0; i < spatial; ++i) {
    KILN_CHECK(padded[i] >= dilated_kernel[i], op, ": the padded input's spatial size ", padded,
               " is smaller than the dilated kernel's ", dilated_kernel, " along spatial dim ", i,
               " (input shape ", input.sizes(), ", weight shape ", weight.sizes(), ", padding ",
               params.padding, ", dilation ", params.dilation, ")");
    sizes.push_back((padded[i] - dilated_kernel[i]) / params.stride[i] + 1);  // < INT64_MAX: dilated >= 1
  }
  return sizes;
}

// ---- the op -----------------------------------------------------------------------------

// `spatial` = 1, 2 or 3 for the front doors; 0 = as many as the weight has.
Tensor convolution_impl(const char* op, const Tensor& input_in, const Tensor& weight_in,
                        const Tensor& bias_in, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                        int64_t groups, int64_t spatial) {
  const Tensor input = autocast_input(input_in, AutocastPolicy::LowerPrecision);
  const Tensor weight = autocast_input(weight_in, AutocastPolicy::LowerPrecision);
  const Tensor bias = autocast_input(bias_in, AutocastPolicy::LowerPrecision);
  conv_arguments::check_operands(op, input, weight, bias, weight.defined() ? weight.size(0) : 0);
  bool batched = false;
  spatial = conv_arguments::spatial_rank(op, input, weight, spatial, batched);
  const Tensor x = batched ? input : input.unsqueeze(0);
  check_channels(op, x, weight, groups);
  const ConvParams params = conv_arguments::make_params(op, stride, padding, dilation, groups, spatial);
  const Tensor out =
      conv_arguments::convolve(op, x, weight, bias, params, output_sizes(op, x, weight, params),
                               /*transposed=*/false);
  return batched ? out : out.squeeze(0);
}

}  // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                   const std::vector<int64_t>& dilation, int64_t groups) {
  return convolution_impl("convolution", input, weight, bias, stride, padding, dilation, groups, 0);
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  return convolution_impl("conv1d", input, weight, bias, stride, padding, dilation, groups, 1);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  return convolution_impl("conv2d", input, weight, bias, stride, padding, dilation, groups, 2);
}

Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  return convolution_impl("conv3d", input, weight, bias, stride, padding, dilation, groups, 3);
}

}  // namespace kiln
