// softmax and log_softmax: validation, the fused forward kernel, and a backward node that
// calls the fused backward kernel (see softmax.h and Backend::softmax). Both are autocast
// float32 ops: under autocast a float16/bfloat16 input is cast to float32 first.
#include "core/ops/softmax.h"

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/ops/factory.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;
using autograd::SavedTensor;

const char* softmax_name(bool log) { return log ? "log_softmax" : "softmax"; }

// A 0-d tensor is one row of one element: the kernels see it as shape [1].
Tensor as_rows(const Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; }

// Both derivatives are functions of the output alone (backend.h has the formulas), so the
// node saves the output and nothing else.
struct SoftmaxBackward final : Node {
  SavedTensor out;
  int64_t dim = 0;
  bool log = false;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor y = out.unpack(*this);
    Tensor grad_in = empty(y.sizes(), {.dtype = y.dtype(), .device = y.device()});
    if (y.numel() > 0) {
      const Tensor grad_out = g[0].to(y.dtype());
      backend(y.device()).softmax_backward(as_rows(grad_out), as_rows(y), dim, log, as_rows(grad_in));
    }
    return {grad_in};
  }
  void release_saved() override { out.release(); }
  std::string name() const override { return softmax_name(log); }
};

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* op = softmax_name(log);
  KILN_CHECK(x.defined(), op, ": undefined tensor");
  KILN_CHECK(x.is_floating_point(), op, ": expected a floating-point input, got ", x.dtype(),
             ". Hint: convert it first, e.g. x.to(DType::Float32)");
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Tensor out = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) {
    NoGradGuard no_grad;
    backend(x.device()).softmax(as_rows(x), d, log, as_rows(out));
  }
  if (autograd::any_requires_grad({&x})) {
    auto node = make_pooled<SoftmaxBackward>();
    node->out = SavedTensor(out);
    node->dim = d;
    node->log = log;
    autograd::record(node, {x}, {out});
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(autocast_input(x, AutocastPolicy::Float32), dim, /*log=*/false);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(autocast_input(x, AutocastPolicy::Float32), dim, /*log=*/true);
}

}  // namespace kiln
