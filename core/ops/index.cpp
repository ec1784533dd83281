// gather, scatter_add and index_select with PyTorch's validation rules, and their
// backward nodes (each gradient is another index op; see index.h).
#include "core/ops/index.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/ops/copy.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

void check_index_tensor(const Tensor& x, const Tensor& index, const char* op) {
  KILN_CHECK(x.defined() && index.defined(), op, ": undefined tensor");
  KILN_CHECK(index.dtype() == DType::Int64, op, ": index must be int64, got ", index.dtype());
  KILN_CHECK(index.device() == x.device(), op, ": index is on ", index.device(), " but the input on ", x.device());
}

// gather/scatter_add: index has x's rank and is no larger than `bound` outside dim.
void check_gather_shapes(const Tensor& bound, const Tensor& index, int64_t dim, const char* op,
                         const char* bound_name) {
  KILN_CHECK(index.dim() == bound.dim() || (bound.dim() == 0 && index.dim() <= 1), op, ": index has ",
             index.dim(), " dimensions but ", bound_name, " has ", bound.dim(), " (shapes ", index.sizes(), " and ",
             bound.sizes(), ")");
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    KILN_CHECK(index.sizes()[d] <= bound.sizes()[d], op, ": index shape ", index.sizes(), " exceeds ", bound_name,
               " shape ", bound.sizes(), " at dimension ", d);
  }
}

// gather: the gradient is scattered back to where each value came from.
struct GatherBackward final : Node {
  SavedTensor index;
  std::vector<int64_t> input_sizes;
  int64_t dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor zero = zeros(input_sizes, {.dtype = g[0].dtype(), .device = g[0].device()});
    return {scatter_add(zero, dim, index.unpack(*this), g[0])};
  }
  void release_saved() override { index.release(); }
  std::string name() const override { return "gather"; }
};

// scatter_add: self's gradient passes through; src's is gathered from where it went.
struct ScatterAddBackward final : Node {
  SavedTensor index;
  int64_t dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor g_src;
    if (needs_input_grad(2)) g_src = gather(g[0], dim, index.unpack(*this));
    return {needs_input_grad(0) ? g[0] : Tensor(), Tensor(), g_src};
  }
  void release_saved() override { index.release(); }
  std::string name() const override { return "scatter_add"; }
};

// index_select: the gradient rows are added back at their indices (repeats accumulate).
struct IndexSelectBackward final : Node {
  SavedTensor index;
  std::vector<int64_t> input_sizes;
  int64_t dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    std::vector<int64_t> shape(g[0].dim(), 1);
    shape[dim] = g[0].sizes()[dim];
    const Tensor spread = index.unpack(*this).reshape(shape).expand(g[0].sizes());
    const Tensor zero = zeros(input_sizes, {.dtype = g[0].dtype(), .device = g[0].device()});
    return {scatter_add(zero, dim, spread, g[0]), Tensor()};
  }
  void release_saved() override { index.release(); }
  std::string name() const override { return "index_select"; }
};

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_tensor(x, index, "gather");
  dim = wrap_dim(dim, x.dim(), "gather");
  check_gather_shapes(x, index, dim, "gather", "input");
  Tensor out = empty(index.sizes(), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) backend(x.device()).gather(x, dim, index, out);
  if (autograd::any_requires_grad({&x})) {
    auto node = std::make_shared<GatherBackward>();
    node->index = SavedTensor(index);
    node->input_sizes = x.sizes();
    node->dim = dim;
    autograd::record(node, {x}, {out});
  }
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index_tensor(self, index, "scatter_add");
  KILN_CHECK(src.defined(), "scatter_add: undefined src");
  KILN_CHECK(src.dtype() == self.dtype(), "scatter_add: src has dtype ", src.dtype(), " but self has ",
             self.dtype());
  KILN_CHECK(src.device() == self.device(), "scatter_add: src is on ", src.device(), " but self on ",
             self.device());
  dim = wrap_dim(dim, self.dim(), "scatter_add");
  check_gather_shapes(self, index, dim, "scatter_add", "self");
  check_gather_shapes(src, index, -1, "scatter_add", "src");
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self.clone();
  }
  if (index.numel() > 0) backend(self.device()).scatter_add(out, dim, index, src);
  if (autograd::any_requires_grad({&self, &src})) {
    auto node = std::make_shared<ScatterAddBackward>();
    node->index = SavedTensor(index);
    node->dim = dim;
    autograd::record(node, {self, index, src}, {out});
  }
  return out;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_tensor(x, index, "index_select");
  KILN_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-d, got shape ", index.sizes());
  KILN_CHECK(x.dim() > 0, "index_select: input must have at least one dimension");
  dim = wrap_dim(dim, x.dim(), "index_select");
  const Tensor flat_index = index.reshape({index.numel()});
  std::vector<int64_t> out_sizes = x.sizes();
  out_sizes[dim] = flat_index.numel();
  Tensor out = empty(out_sizes, {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) backend(x.device()).index_select(x, dim, flat_index, out);
  if (autograd::any_requires_grad({&x})) {
    auto node = std::make_shared<IndexSelectBackward>();
    node->index = SavedTensor(flat_index);
    node->input_sizes = x.sizes();
    node->dim = dim;
    autograd::record(node, {x, index}, {out});
  }
  return out;
}

}  // namespace kiln
