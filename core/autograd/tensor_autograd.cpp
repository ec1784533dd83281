// Tensor's autograd methods: requires_grad, grad, backward, detach, hooks.
#include "core/autograd/engine.h"
#include "core/autograd/node.h"
#include "core/pooled.h"

namespace kiln {

using autograd::autograd_meta;
using autograd::autograd_meta_if_any;

bool Tensor::requires_grad() const {
  const autograd::AutogradMeta* meta = autograd_meta_if_any(*this);
  return meta != nullptr && (meta->requires_grad || meta->grad_fn != nullptr);
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  autograd::AutogradMeta& meta = autograd_meta(*this);
  KILN_CHECK(meta.grad_fn == nullptr || requires_grad,
             "requires_grad_: cannot turn it off on a non-leaf tensor (made by '",
             meta.grad_fn->name(), "'); use detach()");
  KILN_CHECK(!requires_grad || is_floating(dtype()), "requires_grad_: only floating-point "
             "tensors can require gradients, got ", dtype());
  if (meta.grad_fn == nullptr) meta.requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const autograd::AutogradMeta* meta = autograd_meta_if_any(*this);
  return meta ? meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    KILN_CHECK(grad.sizes() == sizes(), "set_grad: gradient of shape ", grad.sizes(),
               " for a tensor of shape ", sizes());
    KILN_CHECK(grad.device() == device() && grad.dtype() == dtype(), "set_grad: gradient is ",
               grad.dtype(), " on ", grad.device(), ", tensor is ", dtype(), " on ", device());
  }
  autograd_meta(*this).grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> kNone;
  const autograd::AutogradMeta* meta = autograd_meta_if_any(*this);
  return meta ? meta->grad_fn : kNone;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph);
}

Tensor Tensor::detach() const {
  const TensorImpl& src = *impl();
  auto alias = make_pooled<TensorImpl>(src.storage, src.storage_offset, src.sizes,
                                            src.strides, src.dtype, src.device);
  alias->view_base = src.view_base ? src.view_base : impl_ptr();
  return Tensor(std::move(alias));
}

Tensor& Tensor::detach_() {
  KILN_CHECK(impl()->view_base == nullptr || !requires_grad(),
             "detach_: cannot detach a view in place; use detach()");
  if (autograd::AutogradMeta* meta = autograd_meta_if_any(*this)) {
    meta->grad_fn = nullptr;
    meta->output_nr = 0;
    meta->requires_grad = false;
  }
  return *this;
}

void Tensor::retain_grad() const {
  KILN_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  autograd::AutogradMeta& meta = autograd_meta(*this);
  if (is_leaf() || meta.retains_grad) return;
  meta.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_ptr();
  meta.grad_fn->pre_hooks.push_back({meta.output_nr, -1, [weak](const Tensor& g) {
    if (auto impl = weak.lock()) {
      autograd::AutogradMeta& m = autograd_meta(Tensor(impl));
      m.grad = m.grad.defined() ? m.grad.add(g) : g.clone();
    }
    return Tensor();
  }});
}

bool Tensor::retains_grad() const {
  const autograd::AutogradMeta* meta = autograd_meta_if_any(*this);
  return meta != nullptr && meta->retains_grad;
}

namespace {
std::atomic<int> g_next_hook_handle{0};
}  // namespace

int Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  KILN_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that does not "
             "require grad");
  const int handle = g_next_hook_handle.fetch_add(1);
  autograd::AutogradMeta& meta = autograd_meta(*this);
  if (meta.grad_fn) {
    meta.grad_fn->pre_hooks.push_back({meta.output_nr, handle, std::move(hook)});
  } else {
    meta.leaf_hooks.emplace_back(handle, std::move(hook));
  }
  return handle;
}

void Tensor::remove_hook(int handle) const {
  autograd::AutogradMeta& meta = autograd_meta(*this);
  std::erase_if(meta.leaf_hooks, [handle](const auto& h) { return h.first == handle; });
  if (meta.grad_fn) {
    std::erase_if(meta.grad_fn->pre_hooks, [handle](const auto& h) { return h.handle == handle; });
  }
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  KILN_CHECK(is_leaf() && requires_grad(), "register_post_accumulate_grad_hook: only leaf "
             "tensors that require grad accumulate gradients");
  autograd_meta(*this).post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace kiln
