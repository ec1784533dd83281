// Shared argument checks and bias handling of convolution and transposed convolution
// (conv_arguments.h).
#include "core/ops/conv_arguments.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/error.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"
#include "core/pooled.h"

namespace kiln::conv_arguments {

Dims per_spatial_dim(const std::vector<int64_t>& values, int64_t spatial, const char* op, const char* what) {
  KILN_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == spatial, op, ": expected ", what,
             " to have 1 or ", spatial, " values (one per spatial dim), got ", values);
  return values.size() == 1 ? Dims(static_cast<size_t>(spatial), values[0]) : Dims(values);
}

void check_operands(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    int64_t c_out) {
  KILN_CHECK(input.defined() && weight.defined(), op, ": undefined input or weight");
  KILN_CHECK(input.dtype() == weight.dtype(), op, ": input and weight must have the same dtype, got ",
             input.dtype(), " and ", weight.dtype());
  KILN_CHECK(input.is_floating_point(), op, ": expected floating-point input and weight, got ", input.dtype(),
             ". Hint: convert them first, e.g. x.to(DType::Float32)");
  KILN_CHECK(input.device() == weight.device(), op, ": input and weight must be on the same device, got ",
             input.device(), " and ", weight.device());
  if (!bias.defined()) return;
  KILN_CHECK(bias.dim() == 1 && bias.size(0) == c_out, op, ": bias must have shape [", c_out,
             "] (the output channels of weight shape ", weight.sizes(), "), got ", bias.sizes());
  KILN_CHECK(bias.dtype() == input.dtype(), op, ": bias must have the input's dtype ", input.dtype(),
             ", got ", bias.dtype());
  KILN_CHECK(bias.device() == input.device(), op, ": bias must be on the input's device ", input.device(),
             ", got ", bias.device());
}

int64_t spatial_rank(const char* op, const Tensor& input, const Tensor& weight, int64_t spatial,
                     bool& batched) {
  if (spatial == 0) {
    KILN_CHECK(weight.dim() >= 3 && weight.dim() <= 5, op,
               ": expected a weight with 2 channel dims and 1-3 spatial dims, got shape ", weight.sizes());
    spatial = weight.dim() - 2;
  }
  KILN_CHECK(weight.dim() == spatial + 2, op, ": expected a ", spatial + 2, "-d weight (2 channel dims and ",
             spatial, " kernel sizes), got shape ", weight.sizes());
  KILN_CHECK(input.dim() == spatial + 1 || input.dim() == spatial + 2, op, ": expected a ", spatial + 1,
             "-d (unbatched) or ", spatial + 2, "-d (batched) input, got shape ", input.sizes());
  batched = input.dim() == spatial + 2;
  return spatial;
}

ConvParams make_params(const char* op, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                       int64_t groups, int64_t spatial) {
  ConvParams params{.stride = per_spatial_dim(stride, spatial, op, "stride"),
                    .padding = per_spatial_dim(padding, spatial, op, "padding"),
                    .dilation = per_spatial_dim(dilation, spatial, op, "dilation"),
                    .groups = groups};
  for (size_t i = 0; i < params.stride.size(); ++i) {
    KILN_CHECK(params.stride[i] > 0, op, ": stride must be positive, got ", params.stride);
    KILN_CHECK(params.dilation[i] > 0, op, ": dilation must be positive, got ", params.dilation);
    KILN_CHECK(params.padding[i] >= 0, op, ": padding must be non-negative, got ", params.padding);
  }
  return params;
}

void check_nonempty(const char* op, const Tensor& input, const Tensor& weight) {
  for (int64_t d = 1; d < input.dim(); ++d) {
    KILN_CHECK(input.size(d) > 0, op,
               ": expected an input with non-zero channels and spatial sizes, got shape ", input.sizes());
  }
  for (int64_t d = 0; d < weight.dim(); ++d) {
    KILN_CHECK(weight.size(d) > 0, op, ": expected a weight with non-zero sizes, got shape ", weight.sizes());
  }
}

void add_channel_bias(Tensor& out, const Tensor& bias) {
  std::vector<int64_t> bias_shape(static_cast<size_t>(out.dim()) - 1, 1);  // [C, 1, ...]
  bias_shape[0] = bias.size(0);
  out.add_(bias.reshape(bias_shape));
}

Tensor channel_bias_grad(const Tensor& grad_out) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < grad_out.dim(); ++d) dims.push_back(d);
  return grad_out.sum(dims);
}

namespace {

struct ConvolutionBackward final : autograd::Node {
  autograd::SavedTensor input, weight;
  std::vector<int64_t> input_sizes, weight_sizes;
  ConvParams params;
  MemoryFormat format = MemoryFormat::Contiguous;  // of the forward's operands, and so of the gradients
  bool transposed = false;
  const char* op = "";  // a string literal: the public op's name

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override;
  void release_saved() override {
    input.release();
    weight.release();
  }
  std::string name() const override { return op; }
};

std::vector<Tensor> ConvolutionBackward::apply(std::vector<Tensor>&& g) {
  const Tensor grad_out = g[0].contiguous(format);
  const TensorOptions options{.dtype = grad_out.dtype(), .device = grad_out.device()};
  Backend& device = backend(grad_out.device());
  Tensor grad_input, grad_weight, grad_bias;
  if (needs_input_grad(0)) {
    grad_input = empty(input_sizes, options, format);
    if (grad_input.numel() > 0) {
      const Tensor w = weight.unpack(*this);
      if (transposed) {
        device.conv_forward(grad_out, w, params, grad_input);
      } else {
        device.conv_backward_input(grad_out, w, params, grad_input);
      }
    }
  }
  if (needs_input_grad(1)) {
    if (grad_out.numel() == 0) {  // an empty batch adds nothing to the weight
      grad_weight = zeros(weight_sizes, options);
    } else {
      grad_weight = empty(weight_sizes, options, format);
      const Tensor x = input.unpack(*this);
      if (transposed) {
        device.conv_backward_weight(x, grad_out, params, grad_weight);
      } else {
        device.conv_backward_weight(grad_out, x, params, grad_weight);
      }
    }
  }
  if (needs_input_grad(2)) grad_bias = channel_bias_grad(grad_out);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

MemoryFormat conv_memory_format(const Tensor& x, const Tensor& weight) {
  const MemoryFormat channels_last = channels_last_format(x.dim());
  if (channels_last == MemoryFormat::Contiguous || weight.dim() != x.dim()) return MemoryFormat::Contiguous;
  if (x.suggest_memory_format() == channels_last || weight.suggest_memory_format() == channels_last) {
    return channels_last;
  }
  // A weight that is both layouts at once (one input channel, a 1x1x1 kernel) but carries
  // the channels-last strides exactly (Module::to(format) gives it them) marks a
  // channels-last model: its stem computes in channels-last too. An ordinary row-major
  // weight has C's stride > 1 and is told apart without computing any strides.
  if (weight.strides()[1] != 1) return MemoryFormat::Contiguous;
  const Dims strides = memory_format_strides(weight.sizes(), channels_last, "conv");
  return weight.strides() == strides && weight.strides() != contiguous_strides(weight.sizes())
             ? channels_last
             : MemoryFormat::Contiguous;
}

Tensor convolve(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                const ConvParams& params, Dims out_sizes, bool transposed) {
  const MemoryFormat format = conv_memory_format(x, weight);
  Tensor out = empty(out_sizes, {.dtype = x.dtype(), .device = x.device()}, format);
  Tensor x_contiguous, weight_contiguous;  // dense in `format`
  {
    NoGradGuard no_grad;
    x_contiguous = x.contiguous(format);
    weight_contiguous = weight.contiguous(format);
    if (out.numel() > 0) {
      if (transposed) {
        backend(x.device()).conv_backward_input(x_contiguous, weight_contiguous, params, out);
      } else {
        backend(x.device()).conv_forward(x_contiguous, weight_contiguous, params, out);
      }
      if (bias.defined()) add_channel_bias(out, bias);
    }
  }
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    auto node = make_pooled<ConvolutionBackward>();
    if (weight.requires_grad()) node->input = autograd::SavedTensor(x_contiguous);
    if (x.requires_grad()) node->weight = autograd::SavedTensor(weight_contiguous);
    node->input_sizes = x.sizes();
    node->weight_sizes = weight.sizes();
    node->params = params;
    node->format = format;
    node->transposed = transposed;
    node->op = op;
    autograd::record(node, {x, weight, bias}, {out});
  }
  return out;
}

}  // namespace kiln::conv_arguments
