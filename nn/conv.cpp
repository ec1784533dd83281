// ConvNd: option expansion and validation, parameters, PyTorch's default initialisation,
// and forward through kiln::convolution.
#include "nn/conv.h"

#include <cmath>
#include <sstream>

#include "core/ops/conv.h"
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
  const std::string name = type_name();
  KILN_CHECK(options.in_channels > 0 && options.out_channels > 0, name, ": in_channels and out_channels must be ",
             "positive, got ", options.in_channels, " and ", options.out_channels);
  KILN_CHECK(options.groups > 0 && options.in_channels % options.groups == 0 &&
                 options.out_channels % options.groups == 0,
             name, ": groups = ", options.groups, " must divide in_channels (", options.in_channels,
             ") and out_channels (", options.out_channels, ")");
  options_.kernel_size = per_dim(options.kernel_size, spatial_dims, name, "kernel_size", 1);
  options_.stride = per_dim(options.stride, spatial_dims, name, "stride", 1);
  options_.padding = per_dim(options.padding, spatial_dims, name, "padding", 0);
  options_.dilation = per_dim(options.dilation, spatial_dims, name, "dilation", 1);
  std::vector<int64_t> shape = {options.out_channels, options.in_channels / options.groups};
  shape.insert(shape.end(), options_.kernel_size.begin(), options_.kernel_size.end());
  weight = register_parameter("weight", empty(shape));
  if (options.bias) bias = register_parameter("bias", empty({options.out_channels}));
  reset_parameters();
}

// Note [Default layer initialisation] in linear.cpp.
void ConvNd::reset_parameters(Generator* generator) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", generator);
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound, generator);
  }
}

Tensor ConvNd::forward(const Tensor& input) {
  KILN_CHECK(input.defined() && (input.dim() == spatial_dims_ + 1 || input.dim() == spatial_dims_ + 2), type_name(),
             ": expected a ", spatial_dims_ + 1, "-d (unbatched) or ", spatial_dims_ + 2, "-d (batched) input, got shape ",
             input.defined() ? input.sizes() : std::vector<int64_t>{});
  return convolution(input, weight, bias, options_.stride, options_.padding, options_.dilation, options_.groups);
}

std::string ConvNd::extra_repr() const {
  std::ostringstream os;
  os << options_.in_channels << ", " << options_.out_channels << ", kernel_size=" << list(options_.kernel_size)
     << ", stride=" << list(options_.stride);
  bool any_padding = false, any_dilation = false;
  for (int64_t p : options_.padding) any_padding = any_padding || p != 0;
  for (int64_t d : options_.dilation) any_dilation = any_dilation || d != 1;
  if (any_padding) os << ", padding=" << list(options_.padding);
  if (any_dilation) os << ", dilation=" << list(options_.dilation);
  if (options_.groups != 1) os << ", groups=" << options_.groups;
  if (!options_.bias) os << ", bias=False";
  return os.str();
}

}  // namespace kiln::nn
