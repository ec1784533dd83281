// View ops and their backward nodes (see view.h).
#include "core/ops/view.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/checked_math.h"
#include "core/ops/copy.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;

// Every view is made here, and checked here: a view never addresses memory outside its
// base's storage (Note [Checked sizes] in core/tensor_impl.h), whatever sizes it was given.
Tensor make_view(const Tensor& base, Dims sizes, Dims strides,
                 int64_t storage_offset, const char* op) {
  const TensorImpl& b = *base.impl();
  check_within_storage(sizes, strides, storage_offset, b.dtype, b.storage.nbytes(), op);
  auto impl = make_pooled<TensorImpl>(b.storage, storage_offset, std::move(sizes),
                                           std::move(strides), b.dtype, b.device);
  impl->view_base = b.view_base ? b.view_base : base.impl_ptr();
  return Tensor(std::move(impl));
}

// A view over exactly its base's elements (a permutation of its dims, or a contiguous
// base seen in another shape): it reaches what the base reaches, which was checked
// within the storage when the base was made, so it needs no check of its own, and it has
// the base's element count (Note [Cached layout]).
Tensor make_view_of_same_elements(const Tensor& base, Dims sizes, Dims strides, bool contiguous) {
  const TensorImpl& b = *base.impl();
  auto impl = make_pooled<TensorImpl>(TensorImpl::Layout{.numel = b.numel(), .contiguous = contiguous}, b.storage,
                                      b.storage_offset, std::move(sizes), std::move(strides), b.dtype, b.device);
  impl->view_base = b.view_base ? b.view_base : base.impl_ptr();
  return Tensor(std::move(impl));
}

// Row-major strides for `sizes` of `numel` (already checked) elements.
Dims row_major_strides(const Dims& sizes, int64_t numel) {
  if (numel == 0) return contiguous_strides(sizes);  // saturated: the other sizes may overflow
  Dims strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  return strides;
}

// ---- backward nodes -----------------------------------------------------------------------

// view, reshape-as-view, flatten, squeeze, unsqueeze: the gradient reshaped back.
struct ReshapeBackward final : Node {
  Dims input_sizes;
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {reshape(g[0], input_sizes)}; }
  std::string name() const override { return op; }
};

struct PermuteBackward final : Node {
  Dims inverse;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {permute(g[0], inverse)}; }
  std::string name() const override { return "permute"; }
};

struct ExpandBackward final : Node {
  Dims input_sizes;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {sum_to(g[0], input_sizes)}; }
  std::string name() const override { return "expand"; }
};

// narrow, slice, select: the gradient written into zeros at the viewed positions.
struct SliceBackward final : Node {
  Dims input_sizes;
  int64_t dim = 0, start = 0, end = 0, step = 1;
  bool squeezed = false;  // select: the view dropped `dim`
  const char* op = "";  // a string literal: the public op's name
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor grad_input = zeros(input_sizes, {.dtype = g[0].dtype(), .device = g[0].device()});
    Tensor region = slice(grad_input, dim, start, end, step);
    region.copy_(squeezed ? unsqueeze(g[0], dim) : g[0]);
    return {grad_input};
  }
  std::string name() const override { return op; }
};

void record_reshape(const Tensor& input, const Tensor& out, const char* op) {
  if (!autograd::any_requires_grad({&input})) return;
  auto node = make_pooled<ReshapeBackward>();
  node->input_sizes = input.sizes();
  node->op = op;
  autograd::record(node, {input}, {out});
}

void record_slice(const Tensor& input, const Tensor& out, int64_t dim, int64_t start, int64_t end,
                  int64_t step, bool squeezed, const char* op) {
  if (!autograd::any_requires_grad({&input})) return;
  auto node = make_pooled<SliceBackward>();
  node->input_sizes = input.sizes();
  node->dim = dim;
  node->start = start;
  node->end = end;
  node->step = step;
  node->squeezed = squeezed;
  node->op = op;
  autograd::record(node, {input}, {out});
}

// `sizes` with its -1 (if any) replaced by what makes `numel` elements. The known sizes'
// product is checked, so [2^32, 2^32] cannot wrap to 0 and pass for an empty shape; a 0
// among them makes it 0 whatever the others are.
Dims infer_size(Dims sizes, int64_t numel, const char* op) {
  int64_t infer_at = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      KILN_CHECK(infer_at < 0, op, ": only one dimension can be -1, got ", sizes);
      infer_at = static_cast<int64_t>(i);
    } else {
      KILN_CHECK(sizes[i] >= 0, op, ": invalid size ", sizes);
    }
  }
  int64_t known = std::find(sizes.begin(), sizes.end(), 0) != sizes.end() ? 0 : 1;
  for (size_t i = 0; i < sizes.size() && known != 0; ++i) {
    if (static_cast<int64_t>(i) == infer_at) continue;
    const std::optional<int64_t> product = checked_mul(known, sizes[i]);
    KILN_CHECK(product, op, ": shape ", sizes, " has more than 2^63 - 1 elements");
    known = *product;
  }
  if (infer_at >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, op, ": shape ", sizes,
               " is invalid for input of size ", numel);
    sizes[infer_at] = numel / known;
  } else {
    KILN_CHECK(known == numel, op, ": shape ", sizes, " is invalid for input of size ", numel);
  }
  return sizes;
}

// Strides for viewing (sizes, strides) as new_sizes without a copy, or nullopt when the
// memory layout does not allow it (PyTorch's computeStride): each run of old dims that
// are laid out contiguously with each other may be split or merged freely.
std::optional<Dims> view_strides(const Dims& sizes,
                                                 const Dims& strides,
                                                 const Dims& new_sizes) {
  Dims new_strides(new_sizes.size());
  const int64_t numel = std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
  if (numel == 0 || sizes.empty()) return contiguous_strides(new_sizes);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

Tensor view(const Tensor& t, Dims sizes) {
  sizes = infer_size(std::move(sizes), t.numel(), "view");
  if (t.is_contiguous()) {  // the common case: any shape of the same elements, row-major
    Dims strides = row_major_strides(sizes, t.numel());
    Tensor out = make_view_of_same_elements(t, std::move(sizes), std::move(strides), /*contiguous=*/true);
    record_reshape(t, out, "view");
    return out;
  }
  auto strides = view_strides(t.sizes(), t.strides(), sizes);
  KILN_CHECK(strides.has_value(), "view: size ", sizes, " is not compatible with the input's size ",
             t.sizes(), " and stride ", t.strides(), " (at least one dimension spans two contiguous "
             "subspaces); use reshape() instead");
  Tensor out = make_view(t, std::move(sizes), std::move(*strides), t.storage_offset(), "view");
  record_reshape(t, out, "view");
  return out;
}

Tensor contiguous_alias(const Tensor& t, Dims sizes) {
  KILN_ASSERT(t.is_contiguous() && !t.requires_grad(), "contiguous_alias: of a strided or recorded tensor");
  KILN_ASSERT(checked_numel(sizes, "contiguous_alias") == t.numel(), "contiguous_alias: ", sizes, " for a tensor of ",
              t.sizes());
  Dims strides = row_major_strides(sizes, t.numel());
  return make_view_of_same_elements(t, std::move(sizes), std::move(strides), /*contiguous=*/true);
}

Tensor reshape(const Tensor& t, Dims sizes) {
  sizes = infer_size(std::move(sizes), t.numel(), "reshape");
  if (view_strides(t.sizes(), t.strides(), sizes)) return view(t, std::move(sizes));
  return view(t.contiguous(), std::move(sizes));
}

Tensor permute(const Tensor& t, const Dims& dims) {
  const int64_t n = t.dim();
  KILN_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: ", dims.size(), " dims given for a ",
             n, "-d tensor");
  Dims sizes(n), strides(n), inverse(n, -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = wrap_dim(dims[i], n, "permute");
    KILN_CHECK(inverse[d] < 0, "permute: dimension ", d, " repeats in ", dims);
    inverse[d] = i;
    sizes[i] = t.sizes()[d];
    strides[i] = t.strides()[d];
  }
  const bool contiguous = is_row_major(sizes, strides, t.numel());
  Tensor out = make_view_of_same_elements(t, std::move(sizes), std::move(strides), contiguous);
  if (autograd::any_requires_grad({&t})) {
    auto node = make_pooled<PermuteBackward>();
    node->inverse = std::move(inverse);
    autograd::record(node, {t}, {out});
  }
  return out;
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  const int64_t n = t.dim();
  if (n == 0) return permute(t, {});
  Dims dims(n);
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(dim0, n, "transpose")], dims[wrap_dim(dim1, n, "transpose")]);
  return permute(t, dims);
}

Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start_opt,
             std::optional<int64_t> end_opt, int64_t step) {
  KILN_CHECK(t.dim() > 0, "slice: cannot slice a 0-d tensor");
  dim = wrap_dim(dim, t.dim(), "slice");
  KILN_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t size = t.sizes()[dim];
  auto clamp_index = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t start = clamp_index(start_opt.value_or(0));
  const int64_t end = std::max(start, clamp_index(end_opt.value_or(size)));
  // 0 <= end - start <= size, so neither this nor the count can overflow (end - start +
  // step - 1 could, for a step near INT64_MAX).
  const int64_t length = end == start ? 0 : (end - start - 1) / step + 1;
  Dims sizes = t.sizes(), strides = t.strides();
  sizes[dim] = length;
  const std::optional<int64_t> stepped_stride = checked_mul(strides[dim], step);
  // A dim of at most one element never moves by its stride, so an overflowing one is kept
  // as it was; otherwise the view could not be addressed in int64.
  KILN_CHECK(stepped_stride || length <= 1, "slice: stride ", strides[dim], " times step ", step,
             " overflows int64 (dimension ", dim, ", ", length, " elements)");
  strides[dim] = stepped_stride.value_or(strides[dim]);
  // An empty view addresses nothing and keeps its base's offset: start * stride need not
  // lie inside the storage (start == size, or any start of an already empty tensor) and
  // may not even fit int64 (a huge stride beside a zero-size dim).
  const bool empty = length == 0 || t.numel() == 0;
  const int64_t offset = empty ? t.storage_offset() : t.storage_offset() + start * t.strides()[dim];
  Tensor out = make_view(t, std::move(sizes), std::move(strides), offset, "slice");
  record_slice(t, out, dim, start, end, step, false, "slice");
  return out;
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  KILN_CHECK(t.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  dim = wrap_dim(dim, t.dim(), "narrow");
  const int64_t size = t.sizes()[dim];
  if (start < 0) start += size;
  KILN_CHECK(start >= 0 && start <= size && length >= 0 && length <= size - start, "narrow: start ", start,
             " and length ", length, " out of range for dimension ", dim, " of size ", size);
  return slice(t, dim, start, start + length, 1);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  KILN_CHECK(t.dim() > 0, "select: cannot select on a 0-d tensor");
  dim = wrap_dim(dim, t.dim(), "select");
  const int64_t size = t.sizes()[dim];
  KILN_CHECK(index >= -size && index < size, "select: index ", index, " out of range for dimension ",
             dim, " of size ", size);
  if (index < 0) index += size;
  Dims sizes = t.sizes(), strides = t.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  // As in slice: an empty view keeps its base's offset (index * stride may not fit).
  const int64_t offset = t.numel() == 0 ? t.storage_offset() : t.storage_offset() + index * t.strides()[dim];
  Tensor out = make_view(t, std::move(sizes), std::move(strides), offset, "select");
  record_slice(t, out, dim, index, index + 1, 1, true, "select");
  return out;
}

Tensor expand(const Tensor& t, const Dims& sizes) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  KILN_CHECK(n >= t.dim(), "expand: the number of sizes (", n, ") must be at least the tensor's "
             "rank (", t.dim(), "); shape ", t.sizes(), " to ", sizes);
  Dims out_sizes(n), out_strides(n);
  const int64_t lead = n - t.dim();
  for (int64_t i = 0; i < n; ++i) {
    if (i < lead) {
      KILN_CHECK(sizes[i] >= 0, "expand: size -1 is not allowed in a new leading dimension; shape ",
                 t.sizes(), " to ", sizes);
      out_sizes[i] = sizes[i];
      out_strides[i] = 0;
      continue;
    }
    const int64_t have = t.sizes()[i - lead];
    const int64_t want = sizes[i] == -1 ? have : sizes[i];
    KILN_CHECK(have == want || have == 1, "expand: the expanded size ", want,
               " must match the existing size ", have, " at non-singleton dimension ", i,
               "; shape ", t.sizes(), " to ", sizes);
    out_sizes[i] = want;
    out_strides[i] = have == want ? t.strides()[i - lead] : 0;
  }
  if (out_sizes == t.sizes()) {
    Tensor out = make_view(t, std::move(out_sizes), t.strides(), t.storage_offset(), "expand");
    record_reshape(t, out, "expand");
    return out;
  }
  Tensor out = make_view(t, std::move(out_sizes), std::move(out_strides), t.storage_offset(), "expand");
  if (autograd::any_requires_grad({&t})) {
    auto node = make_pooled<ExpandBackward>();
    node->input_sizes = t.sizes();
    autograd::record(node, {t}, {out});
  }
  return out;
}

Tensor squeeze(const Tensor& t) {
  Dims sizes;
  for (int64_t s : t.sizes())
    if (s != 1) sizes.push_back(s);
  return reshape(t, sizes);
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return reshape(t, {});
  dim = wrap_dim(dim, t.dim(), "squeeze");
  if (t.sizes()[dim] != 1) return reshape(t, t.sizes());
  Dims sizes = t.sizes();
  sizes.erase(sizes.begin() + dim);
  return reshape(t, sizes);
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  dim = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Dims sizes = t.sizes();
  sizes.insert(sizes.begin() + dim, 1);
  return reshape(t, sizes);
}

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  start_dim = wrap_dim(start_dim, t.dim(), "flatten");
  end_dim = wrap_dim(end_dim, t.dim(), "flatten");
  KILN_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Dims sizes(t.sizes().begin(), t.sizes().begin() + start_dim);
  // Checked: beside a 0-size dim, the merged sizes' product may not fit ([0, 2^62, 2^62]).
  sizes.push_back(checked_numel({t.sizes().begin() + start_dim, t.sizes().begin() + end_dim + 1}, "flatten"));
  sizes.insert(sizes.end(), t.sizes().begin() + end_dim + 1, t.sizes().end());
  return reshape(t, sizes);
}

Tensor as_strided(const Tensor& t, const Dims& sizes,
                  const Dims& strides, int64_t storage_offset) {
  KILN_CHECK(!autograd::any_requires_grad({&t}), "as_strided: not differentiable; call it on a "
             "detached tensor or under NoGradGuard");
  return make_view(t, sizes, strides, storage_offset, "as_strided");
}

Dims broadcast_shapes(const Dims& a, const Dims& b,
                                      const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
               " are not broadcastable (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor sum_to(const Tensor& grad, const Dims& sizes) {
  if (grad.sizes() == sizes) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  KILN_ASSERT(lead >= 0, "sum_to: shape ", grad.sizes(), " cannot reduce to ", sizes);
  Dims dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (sizes[d - lead] == 1 && grad.sizes()[d] != 1)) dims.push_back(d);
  }
  Tensor reduced = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return reshape(reduced, sizes);
}

}  // namespace kiln
