// Conversions and copies, all through Backend::copy (see copy.h).
#include "core/ops/copy.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/backend.h"
#include "core/host_sync.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"
#include "core/ops/inplace.h"
#include "core/ops/view.h"
#include "core/pooled.h"

namespace kiln {
namespace {

using autograd::Node;

// Which backend copies between two devices: the non-CPU one knows both.
Backend& copy_backend(Device a, Device b) { return backend(a.is_cpu() ? b : a); }

// A copy from the host to a GPU during a capture (Note [No host syncs in a capture]) is
// recorded into the graph, which replays it from the same host address: only a
// non-blocking copy from pinned memory is that (a pageable or blocking one needs the host
// at capture time, and CUDA refuses it or, worse, records stale bytes).
void check_capturable(const Tensor& src, const Tensor& dst, bool non_blocking) {
  if (!capturing_on_this_thread() || !src.device().is_cpu() || dst.device().is_cpu()) return;
  KILN_CHECK(non_blocking && src.is_pinned(), "CUDA graph capture: a ", non_blocking ? "" : "blocking ",
             "copy from ", src.is_pinned() ? "pinned" : "pageable", " host memory to ", dst.device(),
             " while a graph is being captured; copy inputs into the graph's static tensors before replay() "
             "instead (or from pinned memory with non_blocking=true)");
}

void raw_copy(const Tensor& src, const Tensor& dst, bool non_blocking) {
  if (dst.numel() == 0) return;
  check_capturable(src, dst, non_blocking);
  if (!src.device().is_cpu() && dst.device().is_cpu() && !non_blocking) note_host_sync(HostSync::CopyToHost, src.device());
  if (src.sizes() == dst.sizes()) count_layout_conversion(dst.sizes(), src.strides(), dst.strides());
  copy_backend(src.device(), dst.device()).copy(src, dst, non_blocking);
}

// to(): the gradient goes back to the input's device and dtype.
struct ToCopyBackward final : Node {
  Device device;
  DType dtype = kDefaultFloat;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {to(g[0], device, dtype)}; }
  std::string name() const override { return "to"; }
};

struct CloneBackward final : Node {
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {g[0]}; }
  std::string name() const override { return "clone"; }
};

// copy_(self, src): zero for the old self, the gradient (reduced and converted) for src.
struct CopyBackward final : Node {
  std::vector<int64_t> src_sizes;
  Device src_device;
  DType src_dtype = kDefaultFloat;
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor grad_self = needs_input_grad(0) ? zeros_like(g[0]) : Tensor();
    Tensor grad_src;
    if (needs_input_grad(1)) grad_src = to(sum_to(g[0], src_sizes), src_device, src_dtype);
    return {grad_self, grad_src};
  }
  std::string name() const override { return "copy_"; }
};

Tensor copy_as_new(const Tensor& t, Device device, DType dtype, bool non_blocking) {
  Tensor out = empty_preserving(t, {.dtype = dtype, .device = device});
  raw_copy(t, out, non_blocking);
  return out;
}

// `t` copied into `out` (which has its sizes), recorded as a clone: the gradient passes through.
Tensor cloned_into(const Tensor& t, Tensor out) {
  raw_copy(t, out, /*non_blocking=*/false);
  if (autograd::any_requires_grad({&t})) autograd::record(make_pooled<CloneBackward>(), {t}, {out});
  return out;
}

}  // namespace

Tensor to(const Tensor& t, Device device, DType dtype, bool non_blocking, bool copy) {
  KILN_CHECK(t.defined(), "to: undefined tensor");
  if (!copy && t.device() == device && t.dtype() == dtype) return t;
  Tensor out = copy_as_new(t, device, dtype, non_blocking);
  if (autograd::any_requires_grad({&t})) {
    KILN_CHECK(is_floating(dtype), "to: cannot convert a tensor that requires grad to ", dtype,
               " (gradients need a floating-point dtype); detach() it first");
    auto node = make_pooled<ToCopyBackward>();
    node->device = t.device();
    node->dtype = t.dtype();
    autograd::record(node, {t}, {out});
  }
  return out;
}

Tensor clone(const Tensor& t) {
  KILN_CHECK(t.defined(), "clone: undefined tensor");
  return cloned_into(t, empty_preserving(t, {.dtype = t.dtype(), .device = t.device()}));
}

Tensor contiguous(const Tensor& t) {
  KILN_CHECK(t.defined(), "contiguous: undefined tensor");
  if (t.is_contiguous()) return t;
  return cloned_into(t, empty(t.sizes(), {.dtype = t.dtype(), .device = t.device()}));
}

Tensor contiguous(const Tensor& t, MemoryFormat format) {
  KILN_CHECK(t.defined(), "contiguous: undefined tensor");
  if (format == MemoryFormat::Contiguous) return contiguous(t);
  KILN_CHECK(t.dim() == memory_format_rank(format), "contiguous: memory format ", format, " is for ",
             memory_format_rank(format), "-d tensors, got one of shape ", t.sizes());
  if (t.is_contiguous(format)) return t;
  return cloned_into(t, empty_strided(t.sizes(), memory_format_strides(t.sizes(), format, "contiguous"),
                                      {.dtype = t.dtype(), .device = t.device()}));
}

bool is_pinned(const Tensor& t) {
  KILN_CHECK(t.defined(), "is_pinned: undefined tensor");
  if (!t.device().is_cpu() || !cuda_is_available() || t.storage().data() == nullptr) return false;
  return backend(Device::cuda()).is_pinned(t.storage().data());
}

Tensor pin_memory(const Tensor& t) {
  KILN_CHECK(t.defined(), "pin_memory: undefined tensor");
  KILN_CHECK(t.device().is_cpu(), "pin_memory: only CPU tensors can be pinned, got a tensor on ", t.device());
  if (is_pinned(t)) return t;
  Tensor out = empty(t.sizes(), {.dtype = t.dtype(), .pin_memory = true});
  NoGradGuard no_grad;
  raw_copy(t, out, false);
  return out;
}

Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  KILN_CHECK(self.defined() && src.defined(), "copy_: undefined tensor");
  broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  KILN_CHECK(expand(src.detach(), self.sizes()).sizes() == self.sizes(), "copy_: source of shape ",
             src.sizes(), " does not broadcast to the destination's shape ", self.sizes());
  const bool needs_grad = autograd::any_requires_grad({&self, &src});
  check_inplace_allowed(self, needs_grad, "copy_");
  {
    NoGradGuard no_grad;
    raw_copy(expand(src, self.sizes()), self, non_blocking);
  }
  self.bump_version();
  if (needs_grad) {
    auto node = make_pooled<CopyBackward>();
    node->src_sizes = src.sizes();
    node->src_device = src.device();
    node->src_dtype = src.dtype();
    autograd::record(node, {self, src}, {self});
  }
  return self;
}

}  // namespace kiln
