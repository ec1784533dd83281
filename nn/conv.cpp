// ConvNd and ConvTransposeNd: option expansion and validation, parameters, PyTorch's
// default initialisation, and forward through kiln::convolution or kiln::conv_transpose.
#include "nn/conv.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "core/ops/conv.h"
#include "core/ops/conv_transpose.h"
#include "core/ops/factory.h"
#include "nn/init.h"

namespace kiln::nn {
namespace {

// One value for every spatial dim, or one per dim; returns one per dim.
std::vector<int64_t> per_dim(const std::vector<int64_t>& values, int64_t dims, const std::string& layer,
                             const char* what, int64_t min) {
  KILN_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == dims, layer, ": ", what,
             " needs 1 or ", dims, " values, got ", values);
  std::vector<int64_t> out = values.size() == 1 ? std::vector<int64_t>(static_cast<size_t>(dims), values[0]) : values;
  for (int64_t v : out) KILN_CHECK(v >= min, layer, ": ", what, " must be >= ", min, ", got ", values);
  return out;
}

std::string list(const std::vector<int64_t>& values) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  os << (values.size() == 1 ? ",)" : ")");
  return os.str();
}

}  // namespace

ConvNd::ConvNd(int64_t spatial_dims, const ConvOptions& options) : spatial_dims_(spatial_dims), options_(options) {
  init(options);
}

ConvNd::ConvNd(int64_t spatial_dims, const ConvTransposeOptions& options)
    : spatial_dims_(spatial_dims),
      transposed_(true),
      options_{.in_channels = options.in_channels,
               .out_channels = options.out_channels,
               .kernel_size = options.kernel_size,
               .stride = options.stride,
               .padding = options.padding,
               .dilation = options.dilation,
               .groups = options.groups,
               .bias = options.bias} {
  init(options_);
  output_padding_ = per_dim(options.output_padding, spatial_dims, type_name(), "output_padding", 0);
  for (int64_t i = 0; i < spatial_dims; ++i) {
    const size_t d = static_cast<size_t>(i);
    KILN_CHECK(output_padding_[d] < options_.stride[d] || output_padding_[d] < options_.dilation[d], type_name(),
               ": output_padding ", output_padding_, " must be smaller than either the stride ", options_.stride,
               " or the dilation ", options_.dilation);
  }
}

void ConvNd::init(const ConvOptions& options) {
  const std::string name = type_name();
  KILN_CHECK(options.in_channels > 0 && options.out_channels > 0, name, ": in_channels and out_channels must be ",
             "positive, got ", options.in_channels, " and ", options.out_channels);
  KILN_CHECK(options.groups > 0 && options.in_channels % options.groups == 0 &&
                 options.out_channels % options.groups == 0,
             name, ": groups = ", options.groups, " must divide in_channels (", options.in_channels,
             ") and out_channels (", options.out_channels, ")");
  options_.kernel_size = per_dim(options.kernel_size, spatial_dims_, name, "kernel_size", 1);
  options_.stride = per_dim(options.stride, spatial_dims_, name, "stride", 1);
  options_.padding = per_dim(options.padding, spatial_dims_, name, "padding", 0);
  options_.dilation = per_dim(options.dilation, spatial_dims_, name, "dilation", 1);
  std::vector<int64_t> shape = transposed_
                                   ? std::vector<int64_t>{options.in_channels, options.out_channels / options.groups}
                                   : std::vector<int64_t>{options.out_channels, options.in_channels / options.groups};
  shape.insert(shape.end(), options_.kernel_size.begin(), options_.kernel_size.end());
  weight = register_parameter("weight", empty(shape));
  if (options.bias) bias = register_parameter("bias", empty({options.out_channels}));
  reset_parameters();
}

std::string ConvNd::type_name() const {
  return (transposed_ ? "ConvTranspose" : "Conv") + std::to_string(spatial_dims_) + "d";
}

// Note [Default layer initialisation] in linear.cpp.
void ConvNd::reset_parameters(Generator* generator) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", generator);
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound, generator);
  }
}

void ConvNd::check_input(const Tensor& input) const {
  KILN_CHECK(input.defined() && (input.dim() == spatial_dims_ + 1 || input.dim() == spatial_dims_ + 2), type_name(),
             ": expected a ", spatial_dims_ + 1, "-d (unbatched) or ", spatial_dims_ + 2, "-d (batched) input, got shape ",
             sizes_or_none(input));
}

Tensor ConvNd::forward(const Tensor& input) {
  check_input(input);
  if (transposed_) {
    return conv_transpose(input, weight, bias, options_.stride, options_.padding, output_padding_, options_.groups,
                          options_.dilation);
  }
  return convolution(input, weight, bias, options_.stride, options_.padding, options_.dilation, options_.groups);
}

// PyTorch's _ConvTransposeNd._output_padding: each requested size minus the smallest one.
Tensor ConvTransposeNd::forward(const Tensor& input, const std::vector<int64_t>& output_size) {
  check_input(input);
  const int64_t spatial = spatial_dims();
  const auto given = static_cast<int64_t>(output_size.size());
  KILN_CHECK(given == spatial || given == spatial + 2, type_name(), ": output_size must have ", spatial,
             " (spatial) or ", spatial + 2, " values, got ", output_size);
  const ConvOptions& o = options();
  std::vector<int64_t> padding_for_size(static_cast<size_t>(spatial));
  for (int64_t i = 0; i < spatial; ++i) {
    const size_t d = static_cast<size_t>(i);
    const int64_t in = input.size(input.dim() - spatial + i);
    const std::optional<int64_t> smallest =
        conv_transpose_output_size(in, o.kernel_size[d], o.stride[d], o.padding[d], o.dilation[d], 0);
    KILN_CHECK(smallest, type_name(), ": the output size overflows int64");
    const int64_t wanted = output_size[static_cast<size_t>(given - spatial + i)];
    // (wanted - smallest in unsigned arithmetic: exact once wanted >= smallest, never overflowing.)
    KILN_CHECK(wanted >= *smallest &&
                   static_cast<uint64_t>(wanted) - static_cast<uint64_t>(*smallest) < static_cast<uint64_t>(o.stride[d]),
               type_name(),
               ": requested an output size of ", output_size, ", but valid sizes along spatial dim ", i,
               " range from ", *smallest, " to ", *smallest + o.stride[d] - 1, " (for an input of shape ",
               input.sizes(), ")");
    padding_for_size[d] = wanted - *smallest;
  }
  return conv_transpose(input, weight, bias, o.stride, o.padding, padding_for_size, o.groups, o.dilation);
}

std::string ConvNd::extra_repr() const {
  std::ostringstream os;
  os << options_.in_channels << ", " << options_.out_channels << ", kernel_size=" << list(options_.kernel_size)
     << ", stride=" << list(options_.stride);
  bool any_padding = false, any_dilation = false;
  for (int64_t p : options_.padding) any_padding = any_padding || p != 0;
  for (int64_t d : options_.dilation) any_dilation = any_dilation || d != 1;
  bool any_output_padding = false;
  for (int64_t p : output_padding_) any_output_padding = any_output_padding || p != 0;
  if (any_padding) os << ", padding=" << list(options_.padding);
  if (any_dilation) os << ", dilation=" << list(options_.dilation);
  if (any_output_padding) os << ", output_padding=" << list(output_padding_);
  if (options_.groups != 1) os << ", groups=" << options_.groups;
  if (!options_.bias) os << ", bias=False";
  return os.str();
}

}  // namespace kiln::nn
