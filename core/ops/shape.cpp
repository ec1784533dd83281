// cat (a primitive with its own backward: narrow views of the gradient), and the ops
// composed from views: stack, split, split_with_sizes, chunk, meshgrid.
#include "core/ops/shape.h"

#include <numeric>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"

namespace kiln {
namespace {

using autograd::Node;

// Each input's gradient is its slice of g along dim, in the input's dtype.
struct CatBackward final : Node {
  int64_t dim = 0;
  std::vector<int64_t> offsets, lengths;
  std::vector<DType> dtypes;
  std::vector<bool> skipped;  // legacy 1-d empty inputs
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    std::vector<Tensor> grads(offsets.size());
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (!needs_input_grad(i)) continue;
      grads[i] = skipped[i] ? zeros({0}, {.dtype = dtypes[i], .device = g[0].device()})
                            : g[0].narrow(dim, offsets[i], lengths[i]).to(dtypes[i]);
    }
    return grads;
  }
  std::string name() const override { return "cat"; }
};

bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor* ref = nullptr;
  for (const Tensor& t : tensors) {
    KILN_CHECK(t.defined(), "cat: undefined tensor in the list");
    if (!ref && !is_legacy_empty(t)) ref = &t;
  }
  if (!ref) ref = &tensors[0];
  KILN_CHECK(ref->dim() > 0, "cat: zero-dimensional tensor cannot be concatenated");
  dim = wrap_dim(dim, ref->dim(), "cat");
  DType dtype = ref->dtype();
  std::vector<int64_t> out_sizes = ref->sizes();
  out_sizes[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    dtype = promote_types(dtype, t.dtype());  // skipped tensors still take part, as in PyTorch
    if (is_legacy_empty(t) && ref != &t) continue;
    KILN_CHECK(t.dim() == ref->dim(), "cat: tensor ", i, " has ", t.dim(), " dimensions but tensor 0 has ",
               ref->dim(), " (shapes ", t.sizes(), " and ", ref->sizes(), ")");
    KILN_CHECK(t.device() == ref->device(), "cat: tensor ", i, " is on ", t.device(), ", expected ", ref->device());
    for (int64_t d = 0; d < t.dim(); ++d) {
      KILN_CHECK(d == dim || t.sizes()[d] == ref->sizes()[d], "cat: sizes must match except in dimension ", dim,
                 ": tensor ", i, " has shape ", t.sizes(), ", expected ", ref->sizes(), " at dimension ", d);
    }
    out_sizes[dim] += t.sizes()[dim];
  }
  Tensor out = empty(out_sizes, {.dtype = dtype, .device = ref->device()});
  auto node = std::make_shared<CatBackward>();
  node->dim = dim;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    const bool skipped = is_legacy_empty(t) && ref != &t;
    const int64_t length = skipped ? 0 : t.sizes()[dim];
    if (length > 0 && t.numel() > 0) {
      NoGradGuard no_grad;
      backend(out.device()).copy(t, out.narrow(dim, offset, length), false);
    }
    node->offsets.push_back(offset);
    node->lengths.push_back(length);
    node->dtypes.push_back(t.dtype());
    node->skipped.push_back(skipped);
    offset += length;
  }
  if (autograd::any_requires_grad(tensors)) autograd::record(node, tensors, {out});
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  KILN_CHECK(tensors[0].defined(), "stack: undefined tensor in the list");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "stack: undefined tensor in the list");
    KILN_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
               tensors[0].sizes(), " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
    expanded.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(expanded, dim);
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  KILN_CHECK(x.defined() && x.dim() > 0, "split_with_sizes: expected a tensor with at least one dimension");
  dim = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "split_with_sizes: sizes must be non-negative, got ", sizes);
    total += s;
  }
  KILN_CHECK(total == x.sizes()[dim], "split_with_sizes: sizes ", sizes, " add up to ", total,
             " but dimension ", dim, " has size ", x.sizes()[dim]);
  std::vector<Tensor> pieces;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.narrow(dim, offset, s));
    offset += s;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  KILN_CHECK(x.defined() && x.dim() > 0, "split: expected a tensor with at least one dimension");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.sizes()[dim];
  KILN_CHECK(split_size > 0 || (split_size == 0 && size == 0), "split: split_size must be positive, got ",
             split_size);
  if (size == 0) return {x};
  std::vector<int64_t> sizes;
  for (int64_t offset = 0; offset < size; offset += split_size) sizes.push_back(std::min(split_size, size - offset));
  return split_with_sizes(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  KILN_CHECK(x.defined() && x.dim() > 0, "chunk: expected a tensor with at least one dimension");
  const int64_t size = x.size(dim);
  const int64_t split_size = (size + chunks - 1) / chunks;
  return split(x, split_size, dim);
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  KILN_CHECK(!tensors.empty(), "meshgrid: expected a non-empty list of tensors");
  KILN_CHECK(indexing == "ij" || indexing == "xy", "meshgrid: indexing must be 'ij' or 'xy', got '", indexing, "'");
  const bool swap = indexing == "xy" && tensors.size() >= 2;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined() && tensors[i].dim() <= 1, "meshgrid: expects 0-d or 1-d tensors, tensor ",
               i, " has shape ", tensors[i].sizes());
    KILN_CHECK(tensors[i].dtype() == tensors[0].dtype() && tensors[i].device() == tensors[0].device(),
               "meshgrid: all tensors must have the same dtype and device");
    shape.push_back(tensors[i].numel());
  }
  if (swap) std::swap(shape[0], shape[1]);
  std::vector<Tensor> grids;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t position = i;
    if (swap && i < 2) position = 1 - i;
    std::vector<int64_t> view_shape(shape.size(), 1);
    view_shape[position] = tensors[i].numel();
    grids.push_back(tensors[i].reshape(view_shape).expand(shape));
  }
  return grids;
}

}  // namespace kiln
