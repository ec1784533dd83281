// Node bookkeeping, SavedTensor checks, AccumulateGrad, and how ops record themselves.
#include "core/autograd/node.h"

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/grad_mode.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"
#include "core/ops/elementwise.h"
#include "core/pooled.h"

namespace kiln::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}  // namespace

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1)) {}

// ---- SavedTensor ------------------------------------------------------------------------

SavedTensor::SavedTensor(const Tensor& tensor) {
  if (!tensor.defined()) return;
  const TensorImpl& src = *tensor.impl();
  auto alias = make_pooled<TensorImpl>(src.storage, src.storage_offset, src.sizes,
                                            src.strides, src.dtype, src.device);
  // The alias shares the storage and with it the version counter: in-place changes after
  // saving are seen.
  data_ = Tensor(std::move(alias));
  saved_version_ = tensor.version();
}

Tensor SavedTensor::unpack(const Node& owner) const {
  KILN_CHECK(!released_, "autograd: trying to backward through the graph of '", owner.name(),
             "' a second time, but its saved tensors were freed by the first backward. "
             "Pass retain_graph=true to the first backward() if you need to call it twice.");
  if (!data_.defined()) return data_;
  KILN_CHECK(data_.version() == saved_version_,
             "autograd: a tensor saved for the backward of '", owner.name(),
             "' was modified by an in-place operation: it is at version ", data_.version(),
             " but was saved at version ", saved_version_,
             ". Hint: replace the in-place op (x.add_(...), x.mul_(...)) by its out-of-place form.");
  return data_;
}

// ---- AutogradMeta and edges ---------------------------------------------------------------

AutogradMeta& autograd_meta(const Tensor& tensor) {
  TensorImpl* impl = tensor.impl();
  KILN_CHECK(impl != nullptr, "autograd: undefined tensor");
  if (!impl->autograd) impl->autograd = std::make_unique<AutogradMeta>();
  return *impl->autograd;
}

AutogradMeta* autograd_meta_if_any(const Tensor& tensor) {
  return tensor.defined() ? tensor.impl()->autograd.get() : nullptr;
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

namespace {

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = autograd_meta(leaf);
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = make_pooled<AccumulateGrad>(leaf.impl_ptr());
    acc->output_meta.push_back({leaf.sizes(), leaf.dtype(), leaf.device()});
    meta.grad_accumulator = acc;
  }
  return acc;
}

}  // namespace

Edge gradient_edge(const Tensor& tensor) {
  const AutogradMeta* meta = autograd_meta_if_any(tensor);
  if (meta == nullptr) return {};
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr};
  if (meta->requires_grad) return {grad_accumulator(tensor), 0};
  return {};
}

void record(const std::shared_ptr<Node>& node, std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
  node->next_edges.clear();
  node->next_edges.reserve(inputs.size());
  for (const Tensor& input : inputs) node->next_edges.push_back(input.defined() ? gradient_edge(input) : Edge{});
  node->output_meta.clear();
  node->output_meta.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->output_meta.push_back({out.sizes(), out.dtype(), out.device()});
    AutogradMeta& meta = autograd_meta(out);
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
    meta.requires_grad = false;  // a non-leaf requires grad through its grad_fn
  }
}

// ---- AccumulateGrad -----------------------------------------------------------------------

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}

namespace {

// The layout Note [Gradient layout] asks of `leaf`'s gradient: the leaf's own strides, or
// row-major (contiguous() is true) when the leaf is row-major or not dense.
bool keeps_own_layout(const Tensor& leaf) {
  return !leaf.is_contiguous() && is_non_overlapping_and_dense(leaf.sizes(), leaf.strides());
}

bool laid_out_for(const Tensor& grad, const Tensor& leaf) {
  return keeps_own_layout(leaf) ? same_strides_where_it_matters(leaf.sizes(), leaf.strides(), grad.strides())
                                : grad.is_contiguous();
}

// A new tensor holding `grad` in the layout Note [Gradient layout] asks of `leaf`.
Tensor copy_laid_out_for(const Tensor& grad, const Tensor& leaf) {
  if (!keeps_own_layout(leaf)) return grad.is_contiguous() ? grad.clone() : grad.contiguous();
  Tensor out = empty_strided(leaf.sizes(), leaf.strides(), {.dtype = grad.dtype(), .device = grad.device()});
  out.copy_(grad);  // differentiable (copy_ records) when a create_graph backward runs
  return out;
}

}  // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor grad = std::move(grad_outputs[0]);
  Tensor leaf(leaf_);
  AutogradMeta& meta = autograd_meta(leaf);
  for (auto& [handle, hook] : meta.leaf_hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  if (!meta.grad.defined()) {
    // Note [Gradient set to none]: take the gradient itself when no one else holds it and
    // it is laid out as Note [Gradient layout] asks.
    const bool exclusive = grad.impl_ptr().use_count() == 1 && !grad.impl()->view_base;
    meta.grad = exclusive && laid_out_for(grad, leaf) ? grad : copy_laid_out_for(grad, leaf);
  } else {
    meta.grad.add_(grad);
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(leaf);
  return {};
}

}  // namespace kiln::autograd
