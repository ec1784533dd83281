// Tensor: the user-facing handle to a strided, typed, device-placed array with autograd.
//
// A Tensor is a shared pointer to a TensorImpl (core/tensor_impl.h): copying a Tensor
// copies the handle, not the data (as in PyTorch). A default-constructed Tensor is
// "undefined" (the None of a missing gradient). Methods mirror PyTorch's where PyTorch has
// them; each forwards to the free function of the same name in core/ops/ (definitions in
// core/tensor_methods.cpp), which is where validation, dispatch and autograd happen.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/host_sync.h"
#include "core/memory_format.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"

namespace kiln {

namespace autograd {
class Node;
}

// Options of the factories, as designated initializers in the order of PyTorch's factory
// keywords (dtype, device, requires_grad, pin_memory; Kiln has no layout):
//   zeros({2, 3}, TensorOptions{.dtype = DType::Float64, .device = Device::cuda()})
// An unset dtype means the factory's default (float32, or int64 for integer factories).
struct TensorOptions {
  std::optional<DType> dtype;
  Device device = Device::cpu();
  bool requires_grad = false;
  // CPU tensors only: allocate page-locked (pinned) host memory, which the GPU reads
  // directly, so host-to-device copies from it can be asynchronous (non_blocking).
  // Needs a CUDA-capable build and machine.
  bool pin_memory = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Dims& sizes() const { return checked_impl().sizes; }
  const Dims& shape() const { return sizes(); }
  const Dims& strides() const { return checked_impl().strides; }
  int64_t size(int64_t dim) const;    // dim may be negative
  int64_t stride(int64_t dim) const;  // dim may be negative
  int64_t dim() const { return static_cast<int64_t>(sizes().size()); }
  int64_t numel() const { return checked_impl().numel(); }
  DType dtype() const { return checked_impl().dtype; }
  Device device() const { return checked_impl().device; }
  int64_t storage_offset() const { return checked_impl().storage_offset; }
  size_t element_size() const { return itemsize(dtype()); }
  bool is_contiguous() const { return checked_impl().is_contiguous(); }
  // Whether the strides are `format`'s dense ones (Note [Memory formats]), and the format
  // they suggest (channels-last when ordered like it, PyTorch's suggest_memory_format).
  bool is_contiguous(MemoryFormat format) const;
  MemoryFormat suggest_memory_format() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  const Storage& storage() const { return checked_impl().storage; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // Address of element (0, 0, ...). data_ptr<T>() checks that T matches the dtype.
  void* data_ptr() const;
  template <typename T>
  T* data_ptr() const {
    KILN_CHECK(dtype_of_v<T> == dtype(), "data_ptr: tensor has dtype ", dtype(),
               ", asked for ", dtype_of_v<T>);
    return static_cast<T*>(data_ptr());
  }

  // Note [Version counter]: bumped by every in-place op; shared by views.
  uint32_t version() const { return checked_impl().storage.version().load(); }
  void bump_version() const { checked_impl().storage.version().fetch_add(1); }

  // Note [Set data]: makes this tensor's TensorImpl describe `data`'s values (storage,
  // offset, sizes, strides, dtype, device), keeping its own autograd state
  // (requires_grad, .grad, grad_fn, hooks). The version counter is the storage's, so it
  // becomes `data`'s; a tensor saved for backward before keeps the old storage and the
  // values it was saved with. Every
  // handle to this impl (a layer's member, an optimizer's list) sees the new data: how
  // Module::to() moves or converts parameters in place, as PyTorch's `param.data = ...`.
  // Not recorded by autograd; `data` must not be this tensor's own impl.
  void set_data(const Tensor& data) const;

  // ---- autograd (core/autograd/) ------------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor grad() const;                 // undefined when None
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const;
  // Computes d(this)/d(leaves) and accumulates it into the leaves' .grad. A non-scalar
  // tensor needs `gradient`. Without retain_graph the graph's saved tensors are freed.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;   // shares data, no history, requires_grad = false
  Tensor& detach_();
  void retain_grad() const;  // a non-leaf keeps its .grad too
  bool retains_grad() const;
  // Hook on the gradient w.r.t. this tensor; may return a replacement (or undefined to
  // keep it). Returns a handle for remove_hook.
  int register_hook(std::function<Tensor(const Tensor&)> hook) const;
  void remove_hook(int handle) const;
  // Leaf only: runs after the gradient was accumulated into .grad (DDP uses it).
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;

  // ---- conversion ---------------------------------------------------------------------
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor clone() const;
  Tensor contiguous() const;
  Tensor contiguous(MemoryFormat format) const;  // itself when already so laid out
  // A copy in pinned host memory (itself when already pinned); is_pinned() says which.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor cpu() const { return to(Device::cpu()); }
  Scalar item() const;
  template <typename T>
  T item() const { return item().to<T>(); }
  // The elements in row-major order, converted to T (tests and printing).
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- views (core/ops/view.h) --------------------------------------------------------
  Tensor view(const Dims& sizes) const;
  Tensor reshape(const Dims& sizes) const;
  Tensor permute(const Dims& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Dims& sizes) const;
  // A view with explicit sizes, strides and storage offset (not differentiable).
  Tensor as_strided(const Dims& sizes, const Dims& strides,
                    int64_t storage_offset) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

  // ---- in-place (bump the version counter) --------------------------------------------
  Tensor& zero_();
  Tensor& fill_(Scalar value);
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);

  // ---- math (core/ops/) ---------------------------------------------------------------
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor neg() const;
  Tensor pow(Scalar exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;

  Tensor sum(Dims dims = {}, bool keepdim = false) const;
  Tensor mean(Dims dims = {}, bool keepdim = false) const;
  Tensor amax(Dims dims = {}, bool keepdim = false) const;
  Tensor amin(Dims dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(Dims dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(Dims dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor norm(double p = 2, Dims dims = {}, bool keepdim = false) const;
  Tensor logsumexp(Dims dims, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  Tensor matmul(const Tensor& other) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;

 private:
  const TensorImpl& checked_impl() const {
    KILN_CHECK(impl_ != nullptr, "Tensor: operation on an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// `t`'s sizes, or no sizes for an undefined tensor: for error messages about either.
inline Dims sizes_or_none(const Tensor& t) { return t.defined() ? t.sizes() : Dims{}; }

template <typename T>
std::vector<T> Tensor::to_vector() const {
  note_host_sync(HostSync::Item, device());
  const Tensor host = to(Device::cpu(), dtype_of_v<T>).contiguous();
  const T* first = host.data_ptr<T>();
  return std::vector<T>(first, first + host.numel());
}

// Wraps a dimension index that may be negative into [0, ndim), naming `op` on error.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace kiln
