// gather, scatter_add and index_select (see index.h): PyTorch's validation rules, the
// backend call, and each op's backward node right under it. Each gradient is another
// index op: gather and index_select scatter g back; scatter_add gathers it.
//
// The op layer checks dtypes, devices and shapes; the index values are checked by the
// kernel as it reads them (one pass over the index, never an out-of-bounds read). Kernels
// get operands of one rank, at least 1-d: a 0-d tensor is handed over as shape [1].
#include "core/ops/index.h"

#include <algorithm>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

// ---- validation -----------------------------------------------------------------------

// PyTorch's shape rules count a 0-d tensor as 1-d of size 1.
int64_t rank_of(const Tensor& t) { return std::max<int64_t>(t.dim(), 1); }
int64_t size_at(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }

// `index` is a defined Int64 tensor on `input`'s device.
void check_index_tensor(const char* op, const Tensor& input, const Tensor& index) {
  KILN_CHECK(input.defined(), op, ": undefined input tensor");
  KILN_CHECK(index.defined(), op, ": undefined index tensor");
  KILN_CHECK(index.dtype() == DType::Int64, op, ": expected index of dtype int64, got ", index.dtype());
  KILN_CHECK(index.device() == input.device(), op, ": index is on ", index.device(), " but the input is on ",
             input.device());
}

// `index` has the rank of `other` (named `other_name` in errors) and is no larger than it
// in every dim except `free_dim` (-1: in every dim).
void check_index_fits(const char* op, const Tensor& index, const Tensor& other, const char* other_name,
                      int64_t free_dim) {
  KILN_CHECK(rank_of(index) == rank_of(other), op, ": index has ", index.dim(), " dimensions but ", other_name,
             " has ", other.dim(), " (shapes ", index.sizes(), " and ", other.sizes(), "); they must be equal");
  for (int64_t d = 0; d < rank_of(index); ++d) {
    KILN_CHECK(d == free_dim || size_at(index, d) <= size_at(other, d), op, ": index of shape ", index.sizes(),
               " is larger than ", other_name, " of shape ", other.sizes(), " in dimension ", d);
  }
}

// What a kernel is handed: the same data, 0-d seen as [1] (called under NoGradGuard).
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

// The leading block of a `sizes`-shaped zero tensor holds `part`; the rest is zero.
Tensor zero_padded(const Tensor& part, const std::vector<int64_t>& sizes) {
  if (part.sizes() == sizes) return part;
  Tensor padded = zeros(sizes, {.dtype = part.dtype(), .device = part.device()});
  Tensor block = padded;
  for (int64_t d = 0; d < part.dim(); ++d) block = block.narrow(d, 0, part.sizes()[d]);
  block.copy_(part);
  return padded;
}

// The ops with the backend's bounds check chosen: the public ops check; the backward
// nodes reuse their forward's index, which was checked already (Note [Checked indices]
// in core/backend.h), and skip the device sync that the CUDA check costs.
using IndexBounds = Backend::IndexBounds;
Tensor gather_with(const Tensor& x, int64_t dim, const Tensor& index, IndexBounds bounds);
Tensor scatter_add_with(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        IndexBounds bounds);

}  // namespace

// ---- gather: d/dx = zeros like x with g scatter-added at index ----------------------------
// Saves the index (the input's values are not needed).

namespace {

struct GatherBackward final : Node {
  SavedTensor index;
  std::vector<int64_t> input_sizes;
  int64_t dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor zero = zeros(input_sizes, {.dtype = g[0].dtype(), .device = g[0].device()});
    return {scatter_add_with(zero, dim, index.unpack(*this), g[0], IndexBounds::Checked)};
  }
  void release_saved() override { index.release(); }
  std::string name() const override { return "gather"; }
};

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return gather_with(x, dim, index, IndexBounds::Check);
}

namespace {

Tensor gather_with(const Tensor& x, int64_t dim, const Tensor& index, IndexBounds bounds) {
  check_index_tensor("gather", x, index);
  dim = wrap_dim(dim, x.dim(), "gather");
  check_index_fits("gather", index, x, "input", dim);
  Tensor out = empty(index.sizes(), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) {
    NoGradGuard no_grad;
    backend(x.device()).gather(at_least_1d(x), dim, at_least_1d(index), at_least_1d(out), bounds);
  }
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<GatherBackward>();
    node->index = SavedTensor(index);
    node->input_sizes = x.sizes();
    node->dim = dim;
    autograd::record(node, {x}, {out});
  }
  return out;
}

}  // namespace

// ---- scatter_add: d/dself = g; d/dsrc = gather(g, dim, index), zero where src was unused --
// Saves the index only when src needs a gradient.

namespace {

struct ScatterAddBackward final : Node {
  SavedTensor index;
  std::vector<int64_t> src_sizes;
  int64_t dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor g_self, g_src;
    if (needs_input_grad(0)) g_self = g[0];
    if (needs_input_grad(2)) {
      g_src = zero_padded(gather_with(g[0], dim, index.unpack(*this), IndexBounds::Checked), src_sizes);
    }
    return {g_self, Tensor(), g_src};
  }
  void release_saved() override { index.release(); }
  std::string name() const override { return "scatter_add"; }
};

}  // namespace

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_add_with(self, dim, index, src, IndexBounds::Check);
}

namespace {

Tensor scatter_add_with(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        IndexBounds bounds) {
  check_index_tensor("scatter_add", self, index);
  KILN_CHECK(src.defined(), "scatter_add: undefined src tensor");
  KILN_CHECK(src.dtype() == self.dtype(), "scatter_add: expected src of self's dtype ", self.dtype(), ", got ",
             src.dtype());
  KILN_CHECK(src.device() == self.device(), "scatter_add: src is on ", src.device(), " but self is on ",
             self.device());
  KILN_CHECK(self.dtype() != DType::Bool, "scatter_add: expected a numeric dtype, got bool (sums of bools are "
             "not defined here; convert to an integer dtype first)");
  dim = wrap_dim(dim, self.dim(), "scatter_add");
  check_index_fits("scatter_add", index, self, "self", dim);
  check_index_fits("scatter_add", index, src, "src", /*free_dim=*/-1);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self.clone();
    if (index.numel() > 0) {
      backend(self.device()).scatter_add(at_least_1d(out), dim, at_least_1d(index), at_least_1d(src), bounds);
    }
  }
  if (autograd::any_requires_grad({&self, &src})) {
    auto node = make_pooled<ScatterAddBackward>();
    if (src.requires_grad()) node->index = SavedTensor(index);
    node->src_sizes = src.sizes();
    node->dim = dim;
    autograd::record(node, {self, index, src}, {out});
  }
  return out;
}

}  // namespace

// ---- index_select: d/dx = zeros like x with g's slices scatter-added at the indices -----
// Saves the (flattened) index. scatter_add wants an index shaped like g: the 1-d index
// is laid along dim and expanded over the other dims (stride 0, no copy).

namespace {

struct IndexSelectBackward final : Node {
  SavedTensor index;
  std::vector<int64_t> input_sizes;
  int64_t dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    std::vector<int64_t> along_dim(g[0].dim(), 1);
    along_dim[dim] = g[0].sizes()[dim];
    const Tensor spread = index.unpack(*this).reshape(along_dim).expand(g[0].sizes());
    // Laid out as the incoming gradient (a channels-last one stays so, as the forward's output).
    Tensor zero =
        empty(input_sizes, {.dtype = g[0].dtype(), .device = g[0].device()}, g[0].suggest_memory_format());
    zero.zero_();
    return {scatter_add_with(zero, dim, spread, g[0], IndexBounds::Checked), Tensor()};
  }
  void release_saved() override { index.release(); }
  std::string name() const override { return "index_select"; }
};

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_tensor("index_select", x, index);
  KILN_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-d, got shape ", index.sizes());
  KILN_CHECK(x.dim() > 0, "index_select: input must have at least one dimension, got a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "index_select");
  Tensor flat_index;
  {
    NoGradGuard no_grad;
    flat_index = index.reshape({index.numel()});
  }
  std::vector<int64_t> out_sizes = x.sizes();
  out_sizes[dim] = flat_index.numel();
  // In the input's suggested memory format (row-major unless it is channels-last; PyTorch
  // returns row-major always): interpolate is index_selects and blends, and a
  // channels-last feature map resampled stays channels-last.
  Tensor out = empty(out_sizes, {.dtype = x.dtype(), .device = x.device()}, x.suggest_memory_format());
  if (out.numel() > 0) backend(x.device()).index_select(x, dim, flat_index, out);
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<IndexSelectBackward>();
    node->index = SavedTensor(flat_index);
    node->input_sizes = x.sizes();
    node->dim = dim;
    autograd::record(node, {x, index}, {out});
  }
  return out;
}

}  // namespace kiln
