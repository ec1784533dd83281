// Pooling layers: each forward picks the functional op for its number of spatial dims;
// the ops validate sizes and shapes.
#include "nn/pooling.h"

#include <sstream>

#include "core/ops/pool.h"

namespace kiln::nn {
namespace {

std::string list(const std::vector<int64_t>& values) {
  std::ostringstream os;
  if (values.size() == 1) {
    os << values[0];
    return os.str();
  }
  os << '(';
  for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  os << ')';
  return os.str();
}

void check_dims(int64_t dims, const std::string& layer) {
  KILN_CHECK(dims >= 1 && dims <= 3, layer, ": spatial dims must be 1, 2 or 3, got ", dims);
}

}  // namespace

MaxPoolNd::MaxPoolNd(int64_t spatial_dims, const MaxPoolOptions& options)
    : spatial_dims_(spatial_dims), options_(options) {
  check_dims(spatial_dims, type_name());
  KILN_CHECK(!options.kernel_size.empty(), type_name(), ": kernel_size is required");
}

Tensor MaxPoolNd::forward(const Tensor& input) {
  const MaxPoolOptions& o = options_;
  switch (spatial_dims_) {
    case 1: return max_pool1d(input, o.kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
    case 2: return max_pool2d(input, o.kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
    default: return max_pool3d(input, o.kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
  }
}

std::string MaxPoolNd::extra_repr() const {
  const MaxPoolOptions& o = options_;
  return "kernel_size=" + list(o.kernel_size) + ", stride=" + list(o.stride.empty() ? o.kernel_size : o.stride) +
         ", padding=" + list(o.padding) + ", dilation=" + list(o.dilation) +
         ", ceil_mode=" + (o.ceil_mode ? "True" : "False");
}

AvgPoolNd::AvgPoolNd(int64_t spatial_dims, const AvgPoolOptions& options)
    : spatial_dims_(spatial_dims), options_(options) {
  check_dims(spatial_dims, type_name());
  KILN_CHECK(!options.kernel_size.empty(), type_name(), ": kernel_size is required");
  KILN_CHECK(spatial_dims > 1 || !options.divisor_override, type_name(), ": divisor_override is not supported in 1d");
}

Tensor AvgPoolNd::forward(const Tensor& input) {
  const AvgPoolOptions& o = options_;
  switch (spatial_dims_) {
    case 1: return avg_pool1d(input, o.kernel_size, o.stride, o.padding, o.ceil_mode, o.count_include_pad);
    case 2:
      return avg_pool2d(input, o.kernel_size, o.stride, o.padding, o.ceil_mode, o.count_include_pad,
                        o.divisor_override);
    default:
      return avg_pool3d(input, o.kernel_size, o.stride, o.padding, o.ceil_mode, o.count_include_pad,
                        o.divisor_override);
  }
}

std::string AvgPoolNd::extra_repr() const {
  const AvgPoolOptions& o = options_;
  return "kernel_size=" + list(o.kernel_size) + ", stride=" + list(o.stride.empty() ? o.kernel_size : o.stride) +
         ", padding=" + list(o.padding);
}

AdaptiveAvgPoolNd::AdaptiveAvgPoolNd(int64_t spatial_dims, const AdaptiveAvgPoolOptions& options)
    : spatial_dims_(spatial_dims), options_(options) {
  check_dims(spatial_dims, type_name());
  KILN_CHECK(!options.output_size.empty(), type_name(), ": output_size is required");
}

Tensor AdaptiveAvgPoolNd::forward(const Tensor& input) {
  switch (spatial_dims_) {
    case 1: return adaptive_avg_pool1d(input, options_.output_size);
    case 2: return adaptive_avg_pool2d(input, options_.output_size);
    default: return adaptive_avg_pool3d(input, options_.output_size);
  }
}

std::string AdaptiveAvgPoolNd::extra_repr() const { return "output_size=" + list(options_.output_size); }

}  // namespace kiln::nn
