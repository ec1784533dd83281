// Max, average and adaptive average pooling (pool.h): PyTorch's validation, the expansion
// of single values to one per spatial dim, then the Backend kernels on a batched input
// [N, C, s...], contiguous or channels-last as it comes (outputs and gradients keep its
// layout); unbatched inputs [C, s...] get N = 1 and lose it again.
// Backward nodes call the backward kernels: max saves its indices, average only numbers.
#include "core/ops/pool.h"

#include <memory>
#include <optional>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"
#include "core/pool_geometry.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

// The public op's name for 1, 2 or 3 spatial dims ("max_pool3d"): a string literal, so
// no string is built per call and backward nodes keep a plain pointer.
using PoolNames = const char* const[3];
constexpr PoolNames kMaxPoolNames = {"max_pool1d", "max_pool2d", "max_pool3d"};
constexpr PoolNames kAvgPoolNames = {"avg_pool1d", "avg_pool2d", "avg_pool3d"};
constexpr PoolNames kAdaptiveAvgPoolNames = {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"};
const char* pool_name(const PoolNames& names, int64_t spatial) {
  KILN_ASSERT(spatial >= 1 && spatial <= 3, "pooling over ", spatial, " spatial dims");
  return names[spatial - 1];
}

// One value per spatial dim from `values` holding one or `spatial` values.
std::vector<int64_t> per_dim(const std::vector<int64_t>& values, int64_t spatial, const char* what,
                             const char* op) {
  KILN_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == spatial, op, ": ", what,
             " must have 1 or ", spatial, " values, got ", values);
  return values.size() == 1 ? std::vector<int64_t>(static_cast<size_t>(spatial), values[0]) : values;
}

// A floating input [C, s...] or [N, C, s...]; every dim but N non-empty (as PyTorch).
void check_input(const Tensor& x, int64_t spatial, const char* op) {
  KILN_CHECK(x.defined(), op, ": undefined tensor");
  KILN_CHECK(x.dim() == spatial + 1 || x.dim() == spatial + 2, op, ": expected a ", spatial + 1, "-d (unbatched) or ",
             spatial + 2, "-d (batched) input [N, C, ...], got ", x.sizes());
  KILN_CHECK(x.is_floating_point(), op, ": expected a floating-point input, got ", x.dtype(),
             ". Hint: convert it first, e.g. x.to(DType::Float32)");
  for (int64_t d = x.dim() == spatial + 2 ? 1 : 0; d < x.dim(); ++d) {
    KILN_CHECK(x.sizes()[d] > 0, op, ": input ", x.sizes(), " has an empty channel or spatial dim ", d);
  }
}

// The input as an [N, C, s...] tensor the kernels take: contiguous, or channels-last when
// it is laid out so (pooling keeps a channels-last activation channels-last, as PyTorch).
Tensor batched(const Tensor& x, int64_t spatial) {
  const Tensor in = x.dim() == spatial + 1 ? x.unsqueeze(0) : x;
  return in.contiguous(in.suggest_memory_format());
}

// The layout the kernels run in for `in` (from batched): its outputs and gradients take it.
MemoryFormat kernel_format(const Tensor& in) {
  return is_channels_last_only(in.sizes(), in.strides()) ? channels_last_format(in.dim())
                                                         : MemoryFormat::Contiguous;
}

// `t` [N, C, ...] shaped as the caller's input was: without N when that was unbatched.
Tensor unbatched_like(const Tensor& t, const Tensor& x, int64_t spatial) {
  if (x.dim() == spatial + 2) return t;
  return t.view(std::vector<int64_t>(t.sizes().begin() + 1, t.sizes().end()));
}

// Kernel, stride (default: the kernel), padding and dilation, one per dim, checked.
PoolParams make_params(const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode,
                       int64_t spatial, const char* op) {
  PoolParams p;
  p.kernel = per_dim(kernel_size, spatial, "kernel_size", op);
  p.stride = stride.empty() ? p.kernel : per_dim(stride, spatial, "stride", op);
  p.padding = per_dim(padding, spatial, "padding", op);
  p.dilation = per_dim(dilation, spatial, "dilation", op);
  p.ceil_mode = ceil_mode;
  for (size_t d = 0; d < p.kernel.size(); ++d) {
    KILN_CHECK(p.kernel[d] > 0, op, ": kernel_size must be positive, got ", p.kernel);
    KILN_CHECK(p.stride[d] > 0, op, ": stride must be positive, got ", p.stride);
    KILN_CHECK(p.dilation[d] > 0, op, ": dilation must be positive, got ", p.dilation);
    KILN_CHECK(p.padding[d] >= 0 && p.padding[d] <= p.kernel[d] / 2, op,
               ": padding must be non-negative and at most half of kernel_size, got padding ", p.padding,
               " for kernel_size ", p.kernel);
  }
  return p;
}

// [N, C, o...] for input `in` [N, C, s...]; every o must be >= 1.
std::vector<int64_t> output_sizes(const Tensor& in, const PoolParams& p, const char* op) {
  std::vector<int64_t> sizes(in.sizes().begin(), in.sizes().begin() + 2);
  for (size_t d = 0; d < p.kernel.size(); ++d) {
    const int64_t s = in.sizes()[d + 2];
    const int64_t dil = p.dilation.empty() ? 1 : p.dilation[d];
    const std::optional<int64_t> out = pool_output_size(s, p.kernel[d], p.stride[d], p.padding[d], dil, p.ceil_mode);
    KILN_CHECK(out, op, ": kernel_size ", p.kernel, ", stride ", p.stride, ", padding ", p.padding, " and dilation ",
               p.dilation, " overflow the index range 2^61 along spatial dim ", d, " (input ", in.sizes(), ")");
    sizes.push_back(*out);
    KILN_CHECK(sizes.back() >= 1, op, ": input ", in.sizes(), " is too small for kernel_size ", p.kernel,
               " with padding ", p.padding, (p.dilation.empty() ? "" : " and dilation "),
               (p.dilation.empty() ? std::vector<int64_t>{} : p.dilation), ": the output size would be ",
               sizes.back(), " along spatial dim ", d);
  }
  // An average window's divisor multiplies its padded extents, so a padded plane must fit
  // too (each padded size is below kPoolIndexLimit now, so these sums cannot overflow).
  std::vector<int64_t> padded_plane;
  for (size_t d = 0; d < p.kernel.size(); ++d) padded_plane.push_back(in.sizes()[d + 2] + 2 * p.padding[d]);
  KILN_CHECK(checked_numel(padded_plane, op) <= kPoolIndexLimit, op, ": the padded input ", padded_plane,
             " has more than 2^61 elements per plane (input ", in.sizes(), ", padding ", p.padding, ")");
  return sizes;
}

// ==== max pooling ============================================================================

// grad_in gets each grad_out element at the index its window's max came from; saves the
// indices (not the input) and the shapes.
struct MaxPoolBackward final : Node {
  SavedTensor indices;            // [N, C, o...], in `format`
  std::vector<int64_t> in_sizes;  // [N, C, s...]
  MemoryFormat format = MemoryFormat::Contiguous;  // the forward's layout
  std::vector<int64_t> x_sizes;   // the caller's input (maybe unbatched)
  PoolParams params;
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor idx = indices.unpack(*this);
    const DType dtype = output_meta[0].dtype;
    Tensor grad_in = empty(in_sizes, {.dtype = dtype, .device = idx.device()}, format);
    const Tensor grad_out = g[0].to(dtype).reshape(idx.sizes()).contiguous(format);
    if (grad_in.numel() > 0) backend(idx.device()).max_pool_backward(grad_out, idx, params, grad_in);
    return {grad_in.view(x_sizes)};
  }
  void release_saved() override { indices.release(); }
  std::string name() const override { return op; }
};

std::tuple<Tensor, Tensor> max_pool_impl(const Tensor& x, int64_t spatial, const std::vector<int64_t>& kernel_size,
                                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                         const std::vector<int64_t>& dilation, bool ceil_mode) {
  const char* op = pool_name(kMaxPoolNames, spatial);
  check_input(x, spatial, op);
  const PoolParams params = make_params(kernel_size, stride, padding, dilation, ceil_mode, spatial, op);
  Tensor out, indices;
  std::vector<int64_t> in_sizes;
  MemoryFormat format = MemoryFormat::Contiguous;
  {
    NoGradGuard no_grad;
    const Tensor in = batched(x, spatial);
    in_sizes = in.sizes();
    format = kernel_format(in);
    const std::vector<int64_t> sizes = output_sizes(in, params, op);
    out = empty(sizes, {.dtype = x.dtype(), .device = x.device()}, format);
    indices = empty(sizes, {.dtype = DType::Int64, .device = x.device()}, format);
    if (out.numel() > 0) backend(x.device()).max_pool_forward(in, params, out, indices);
    out = unbatched_like(out, x, spatial);
  }
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<MaxPoolBackward>();
    node->indices = SavedTensor(indices);
    node->in_sizes = in_sizes;
    node->format = format;
    node->x_sizes = x.sizes();
    node->params = params;
    node->op = op;
    autograd::record(node, {x}, {out});
  }
  return {out, unbatched_like(indices, x, spatial)};
}

// ==== average pooling ========================================================================

// grad_out spread evenly over each window (Note [Average pooling divisor]); saves only the
// parameters and the shapes.
struct AvgPoolBackward final : Node {
  std::vector<int64_t> in_sizes, out_sizes, x_sizes;
  MemoryFormat format = MemoryFormat::Contiguous;  // the forward's layout
  PoolParams params;  // kernel empty: adaptive
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const autograd::TensorMeta& meta = output_meta[0];
    Tensor grad_in = empty(in_sizes, {.dtype = meta.dtype, .device = meta.device}, format);
    const Tensor grad_out = g[0].to(meta.dtype).reshape(out_sizes).contiguous(format);
    if (grad_in.numel() > 0 && params.kernel.empty()) {
      backend(meta.device).adaptive_avg_pool_backward(grad_out, grad_in);
    } else if (grad_in.numel() > 0) {
      backend(meta.device).avg_pool_backward(grad_out, params, grad_in);
    }
    return {grad_in.view(x_sizes)};
  }
  std::string name() const override { return op; }
};

void record_avg_backward(const Tensor& x, const Tensor& out, const std::vector<int64_t>& in_sizes,
                         const std::vector<int64_t>& out_sizes, MemoryFormat format, const PoolParams& params,
                         const char* op) {
  if (!autograd::any_requires_grad({&x})) return;
  auto node = make_pooled<AvgPoolBackward>();
  node->in_sizes = in_sizes;
  node->format = format;
  node->out_sizes = out_sizes;
  node->x_sizes = x.sizes();
  node->params = params;
  node->op = op;
  autograd::record(node, {x}, {out});
}

Tensor avg_pool_impl(const Tensor& x, int64_t spatial, const std::vector<int64_t>& kernel_size,
                     const std::vector<int64_t>& stride, const std::vector<int64_t>& padding, bool ceil_mode,
                     bool count_include_pad, std::optional<int64_t> divisor_override) {
  const char* op = pool_name(kAvgPoolNames, spatial);
  check_input(x, spatial, op);
  PoolParams params = make_params(kernel_size, stride, padding, {1}, ceil_mode, spatial, op);
  params.dilation.clear();  // average pooling has none (PoolParams)
  params.count_include_pad = count_include_pad;
  if (divisor_override) {
    KILN_CHECK(*divisor_override != 0, op, ": divisor_override must be non-zero");
    KILN_CHECK(*divisor_override > 0, op, ": divisor_override must be positive, got ", *divisor_override);
    params.divisor_override = *divisor_override;
  }
  Tensor out;
  std::vector<int64_t> in_sizes, out_sizes;
  MemoryFormat format = MemoryFormat::Contiguous;
  {
    NoGradGuard no_grad;
    const Tensor in = batched(x, spatial);
    in_sizes = in.sizes();
    format = kernel_format(in);
    out_sizes = output_sizes(in, params, op);
    out = empty(out_sizes, {.dtype = x.dtype(), .device = x.device()}, format);
    if (out.numel() > 0) backend(x.device()).avg_pool_forward(in, params, out);
    out = unbatched_like(out, x, spatial);
  }
  record_avg_backward(x, out, in_sizes, out_sizes, format, params, op);
  return out;
}

Tensor adaptive_avg_pool_impl(const Tensor& x, int64_t spatial, const std::vector<int64_t>& output_size) {
  const char* op = pool_name(kAdaptiveAvgPoolNames, spatial);
  check_input(x, spatial, op);
  const std::vector<int64_t> o = per_dim(output_size, spatial, "output_size", op);
  for (int64_t v : o) KILN_CHECK(v > 0, op, ": output_size must be positive, got ", output_size);
  Tensor out;
  std::vector<int64_t> in_sizes, out_sizes;
  MemoryFormat format = MemoryFormat::Contiguous;
  {
    NoGradGuard no_grad;
    const Tensor in = batched(x, spatial);
    in_sizes = in.sizes();
    format = kernel_format(in);
    out_sizes = {in_sizes[0], in_sizes[1]};
    out_sizes.insert(out_sizes.end(), o.begin(), o.end());
    out = empty(out_sizes, {.dtype = x.dtype(), .device = x.device()}, format);
    if (out.numel() > 0) backend(x.device()).adaptive_avg_pool_forward(in, out);
    out = unbatched_like(out, x, spatial);
  }
  record_avg_backward(x, out, in_sizes, out_sizes, format, PoolParams{}, op);
  return out;
}

}  // namespace

Tensor max_pool1d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  return std::get<0>(max_pool_impl(input, 1, kernel_size, stride, padding, dilation, ceil_mode));
}
Tensor max_pool2d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  return std::get<0>(max_pool_impl(input, 2, kernel_size, stride, padding, dilation, ceil_mode));
}
Tensor max_pool3d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  return std::get<0>(max_pool_impl(input, 3, kernel_size, stride, padding, dilation, ceil_mode));
}
std::tuple<Tensor, Tensor> max_pool_with_indices(const Tensor& input, int64_t spatial_dims,
                                                 const std::vector<int64_t>& kernel_size,
                                                 const std::vector<int64_t>& stride,
                                                 const std::vector<int64_t>& padding,
                                                 const std::vector<int64_t>& dilation, bool ceil_mode) {
  KILN_CHECK(spatial_dims >= 1 && spatial_dims <= 3, "max_pool_with_indices: spatial_dims must be 1, 2 or 3, got ",
             spatial_dims);
  return max_pool_impl(input, spatial_dims, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor avg_pool1d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad) {
  return avg_pool_impl(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, std::nullopt);
}
Tensor avg_pool2d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return avg_pool_impl(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}
Tensor avg_pool3d(const Tensor& input, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return avg_pool_impl(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

Tensor adaptive_avg_pool1d(const Tensor& input, const std::vector<int64_t>& output_size) {
  return adaptive_avg_pool_impl(input, 1, output_size);
}
Tensor adaptive_avg_pool2d(const Tensor& input, const std::vector<int64_t>& output_size) {
  return adaptive_avg_pool_impl(input, 2, output_size);
}
Tensor adaptive_avg_pool3d(const Tensor& input, const std::vector<int64_t>& output_size) {
  return adaptive_avg_pool_impl(input, 3, output_size);
}

}  // namespace kiln
