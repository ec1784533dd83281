// Shape ops (see shape.h). cat is the one primitive here: it allocates its result, copies
// each input into a narrow() view of it through Backend::copy, and has its own backward
// (each input's gradient is the matching narrow view of g). Everything else is composed:
// stack = unsqueeze + cat; split, split_with_sizes and chunk are narrow() views;
// meshgrid outputs are expand() views of reshaped inputs. Those inherit their gradients
// from the view ops (core/ops/view.cpp) and need no backward node of their own.
#include "core/ops/shape.h"

#include <algorithm>
#include <optional>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/checked_math.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;

// ---- cat ------------------------------------------------------------------------------

// Note [Legacy empty tensors in cat]: PyTorch skips 1-d tensors of shape [0] in cat
// whatever the other inputs' rank, so torch.cat([torch.empty(0), x]) works for any x
// (old code built results by cat-ing onto an empty start). A skipped tensor still takes
// part in dtype promotion and the device check, but not in the shape checks.
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

// Each input's gradient is its slice of g along dim, cast back to the input's dtype
// (the output may have a wider, promoted dtype). Saves no tensors, only the layout.
struct CatBackward final : Node {
  int64_t dim = 0;
  struct Piece {
    int64_t offset = 0, length = 0;
    DType dtype = kDefaultFloat;
    bool skipped = false;  // Note [Legacy empty tensors in cat]
  };
  std::vector<Piece> pieces;  // one per forward input
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    std::vector<Tensor> grads(pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (!needs_input_grad(i)) continue;
      const Piece& p = pieces[i];
      grads[i] = p.skipped ? zeros({0}, {.dtype = p.dtype, .device = g[0].device()})
                           : g[0].narrow(dim, p.offset, p.length).to(p.dtype);
    }
    return grads;
  }
  std::string name() const override { return "cat"; }
};

// The input every other is checked against: the first that is not a legacy empty tensor
// (or input 0 when all are).
size_t cat_reference(const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!is_legacy_empty(tensors[i])) return i;
  }
  return 0;
}

// Every input is defined, at least 1-d and on the reference's device; the non-skipped ones
// have the reference's rank and sizes, except along `dim`.
void check_cat_inputs(const std::vector<Tensor>& tensors, size_t ref, int64_t dim) {
  const Tensor& r = tensors[ref];
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.device() == r.device(), "cat: expected all tensors on the same device, but tensor ", i, " is on ",
               t.device(), " and tensor ", ref, " on ", r.device());
    if (is_legacy_empty(t) && i != ref) continue;
    KILN_CHECK(t.dim() == r.dim(), "cat: tensor ", i, " has ", t.dim(), " dimensions but tensor ", ref, " has ",
               r.dim(), " (shapes ", t.sizes(), " and ", r.sizes(), ")");
    for (int64_t d = 0; d < t.dim(); ++d) {
      KILN_CHECK(d == dim || t.sizes()[d] == r.sizes()[d], "cat: sizes must match except in dimension ", dim,
                 ", but tensor ", i, " has shape ", t.sizes(), " and tensor ", ref, " has shape ", r.sizes(),
                 " (they differ in dimension ", d, ")");
    }
  }
}

// The dtype of cat's result. result_type() ranks operands by kind (Note [Type promotion]),
// but every cat input is a dimensioned tensor (0-d ones are rejected), so it reduces to
// promote_types over all of them, skipped legacy empty tensors included (as PyTorch).
DType cat_dtype(const std::vector<Tensor>& tensors) {
  DType dtype = tensors[0].dtype();
  for (const Tensor& t : tensors) dtype = promote_types(dtype, t.dtype());
  return dtype;
}

}  // namespace

namespace {
// PyTorch's rule for cat's result: laid out in the inputs' memory format when they all
// suggest the same one (channels-last feature maps concatenated along C stay
// channels-last, as in a DenseNet block), else row-major.
MemoryFormat cat_memory_format(const std::vector<Tensor>& tensors,
                               const std::vector<CatBackward::Piece>& pieces) {
  std::optional<MemoryFormat> format;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (pieces[i].skipped) continue;
    const MemoryFormat suggested = tensors[i].suggest_memory_format();
    if (format && *format != suggested) return MemoryFormat::Contiguous;
    format = suggested;
  }
  return format.value_or(MemoryFormat::Contiguous);
}
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "cat: tensor ", i, " is undefined");
    KILN_CHECK(tensors[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
  }
  const size_t ref = cat_reference(tensors);
  dim = wrap_dim(dim, tensors[ref].dim(), "cat");
  check_cat_inputs(tensors, ref, dim);

  std::vector<CatBackward::Piece> pieces;
  std::vector<int64_t> out_sizes = tensors[ref].sizes();
  out_sizes[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const bool skipped = is_legacy_empty(tensors[i]) && i != ref;
    const int64_t length = skipped ? 0 : tensors[i].sizes()[dim];
    pieces.push_back({.offset = out_sizes[dim], .length = length, .dtype = tensors[i].dtype(), .skipped = skipped});
    const std::optional<int64_t> total = checked_add(out_sizes[dim], length);
    KILN_CHECK(total, "cat: the sizes along dimension ", dim, " add up to more than 2^63 - 1");
    out_sizes[dim] = *total;
  }

  Tensor out = empty(out_sizes, {.dtype = cat_dtype(tensors), .device = tensors[ref].device()},
                     cat_memory_format(tensors, pieces));
  {
    NoGradGuard no_grad;  // the narrow views of `out` are plumbing, not graph
    for (size_t i = 0; i < tensors.size(); ++i) {
      const CatBackward::Piece& p = pieces[i];
      if (p.skipped || tensors[i].numel() == 0) continue;
      backend(out.device()).copy(tensors[i], out.narrow(dim, p.offset, p.length), /*non_blocking=*/false);
    }
  }
  if (autograd::any_requires_grad(tensors)) {
    auto node = make_pooled<CatBackward>();
    node->dim = dim;
    node->pieces = std::move(pieces);
    autograd::record(node, tensors, std::span<const Tensor>(&out, 1));
  }
  return out;
}

// ---- stack: unsqueeze each input at dim, then cat (gradient through both) ----------------

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    KILN_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
               tensors[0].sizes(), " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
  }
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> unsqueezed;
  unsqueezed.reserve(tensors.size());
  for (const Tensor& t : tensors) unsqueezed.push_back(t.unsqueeze(dim));
  return cat(unsqueezed, dim);
}

// ---- split, split_with_sizes, chunk: narrow views (gradient through narrow) -------------

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  KILN_CHECK(x.defined(), "split_with_sizes: undefined tensor");
  KILN_CHECK(x.dim() > 0, "split_with_sizes: expected a tensor with at least one dimension, got a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "split_with_sizes: sizes must be non-negative, got ", sizes);
    const std::optional<int64_t> sum = checked_add(total, s);
    KILN_CHECK(sum, "split_with_sizes: sizes ", sizes, " add up to more than 2^63 - 1");
    total = *sum;
  }
  KILN_CHECK(total == x.sizes()[dim], "split_with_sizes: sizes ", sizes, " add up to ", total, " but dimension ",
             dim, " has size ", x.sizes()[dim]);
  std::vector<Tensor> pieces;
  pieces.reserve(sizes.size());
  int64_t offset = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.narrow(dim, offset, s));
    offset += s;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  KILN_CHECK(x.defined(), "split: undefined tensor");
  KILN_CHECK(x.dim() > 0, "split: expected a tensor with at least one dimension, got a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.sizes()[dim];
  KILN_CHECK(split_size > 0 || (split_size == 0 && size == 0), "split: split_size must be positive, got ",
             split_size, " for dimension ", dim, " of size ", size);
  // An empty dim still gives one (empty) piece, as in PyTorch.
  if (size == 0) return split_with_sizes(x, {0}, dim);
  std::vector<int64_t> sizes;
  for (int64_t offset = 0; offset < size; offset += split_size) sizes.push_back(std::min(split_size, size - offset));
  return split_with_sizes(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(x.defined(), "chunk: undefined tensor");
  KILN_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  KILN_CHECK(x.dim() > 0, "chunk: expected a tensor with at least one dimension, got a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t size = x.sizes()[dim];
  // An empty dim gives `chunks` empty pieces (split would give one), as PyTorch's; a
  // count no list can hold is refused rather than thrown as std::length_error.
  if (size == 0) {
    KILN_CHECK(static_cast<uint64_t>(chunks) <= std::vector<Tensor>().max_size(), "chunk: ", chunks,
               " empty pieces of dimension ", dim, " are more than a list can hold");
    return split_with_sizes(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  }
  return split(x, (size - 1) / chunks + 1, dim);  // ceil(size / chunks), without size + chunks overflowing
}

// ---- meshgrid: expand views of reshaped inputs (gradient through expand and reshape) ----

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  KILN_CHECK(!tensors.empty(), "meshgrid: expected a non-empty list of tensors");
  KILN_CHECK(indexing == "ij" || indexing == "xy", "meshgrid: indexing must be \"ij\" or \"xy\", got \"", indexing,
             "\"");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.defined(), "meshgrid: tensor ", i, " is undefined");
    KILN_CHECK(t.dim() <= 1, "meshgrid: expects 0-d or 1-d tensors, but tensor ", i, " has shape ", t.sizes());
    KILN_CHECK(t.dtype() == tensors[0].dtype(), "meshgrid: expects all tensors to have the same dtype, but tensor ",
               i, " is ", t.dtype(), " and tensor 0 is ", tensors[0].dtype());
    KILN_CHECK(t.device() == tensors[0].device(), "meshgrid: expects all tensors on the same device, but tensor ",
               i, " is on ", t.device(), " and tensor 0 on ", tensors[0].device());
  }
  // Output dim k runs along input axis[k]; "xy" (Cartesian) swaps the first two, so a
  // grid from (x, y) is indexed [y][x] like an image.
  std::vector<size_t> axis(tensors.size());
  for (size_t k = 0; k < axis.size(); ++k) axis[k] = k;
  if (indexing == "xy" && tensors.size() >= 2) std::swap(axis[0], axis[1]);
  std::vector<int64_t> grid_shape(tensors.size());
  for (size_t k = 0; k < axis.size(); ++k) grid_shape[k] = tensors[axis[k]].numel();

  std::vector<Tensor> grids(tensors.size());
  for (size_t k = 0; k < axis.size(); ++k) {
    std::vector<int64_t> column_shape(tensors.size(), 1);  // the input along output dim k
    column_shape[k] = grid_shape[k];
    grids[axis[k]] = tensors[axis[k]].reshape(column_shape).expand(grid_shape);
  }
  return grids;
}

}  // namespace kiln
