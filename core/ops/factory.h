// Factories: tensors made from nothing, a value, a range, or caller memory.
//
// All allocate on options.device through that device's backend and fill there (no CPU
// round trip for CUDA tensors). Random factories live in core/ops/random.h.
#pragma once

#include <functional>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// `sizes` is taken by value: an op's freshly computed shape is moved into the tensor.
Tensor empty(Dims sizes, TensorOptions options = {});
// empty() whose size errors name `op` (Note [Checked sizes]): for the factories outside
// this file (rand, randint, randperm, bernoulli), so "randperm: ..." is what a user reads.
Tensor empty(Dims sizes, TensorOptions options, const char* op);
// The same for a std::vector and a braced list. Without the vector overload, a call
// `empty(shape)` with a std::vector would pick std::empty (found through the vector's
// namespace, an exact match where Dims needs a conversion) and return a bool; the braced
// one keeps `empty({2, 3})` unambiguous beside it.
inline Tensor empty(const std::vector<int64_t>& sizes, TensorOptions options = {}) { return empty(Dims(sizes), options); }
inline Tensor empty(std::initializer_list<int64_t> sizes, TensorOptions options = {}) {
  return empty(Dims(sizes), options);
}
inline Tensor empty(const std::vector<int64_t>& sizes, TensorOptions options, const char* op) {
  return empty(Dims(sizes), options, op);
}
inline Tensor empty(std::initializer_list<int64_t> sizes, TensorOptions options, const char* op) {
  return empty(Dims(sizes), options, op);
}
Tensor empty_strided(const Dims& sizes, const Dims& strides,
                     TensorOptions options = {});
// An uninitialised tensor laid out densely in `format` (core/memory_format.h); a rank the
// format is not for is a kiln::Error.
Tensor empty(const Dims& sizes, TensorOptions options, MemoryFormat format);
Tensor zeros(const Dims& sizes, TensorOptions options = {});
Tensor ones(const Dims& sizes, TensorOptions options = {});
// dtype defaults to the value's category: bool, int64 or float32.
Tensor full(const Dims& sizes, Scalar value, TensorOptions options = {});
// A 0-d tensor holding `value`.
Tensor scalar_tensor(Scalar value, TensorOptions options = {});

// An uninitialised tensor of `like`'s sizes in options' dtype and on options' device,
// laid out as `like` is (PyTorch's preserve_format): a channels-last or permuted tensor's
// twin has its strides, a strided one's is dense in its own dims' order, a row-major
// one's is row-major (preserved_strides in core/memory_format.h).
Tensor empty_preserving(const Tensor& like, TensorOptions options);

// Same shape, device, dtype and layout as `like` (options.dtype overrides the dtype; use
// .to() to change device; the layout as empty_preserving); never requires grad unless
// options do.
Tensor empty_like(const Tensor& like, TensorOptions options = {});
Tensor zeros_like(const Tensor& like, TensorOptions options = {});
Tensor ones_like(const Tensor& like, TensorOptions options = {});
Tensor full_like(const Tensor& like, Scalar value, TensorOptions options = {});

// [start, end) in steps of `step`: int64 when all three are integers, else float32.
Tensor arange(Scalar end, TensorOptions options = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = {});
// `steps` evenly spaced values from start to end inclusive (float32 by default).
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, TensorOptions options = {});

// Wraps caller memory without copying (torch.from_blob / as_tensor). The memory must
// outlive the tensor unless `deleter` frees it when the last view goes away. Strides
// default to contiguous; options.dtype defaults to float32.
Tensor from_blob(void* data, const Dims& sizes, TensorOptions options = {},
                 std::function<void(void*)> deleter = nullptr);
Tensor from_blob(void* data, const Dims& sizes, const Dims& strides,
                 TensorOptions options = {}, std::function<void(void*)> deleter = nullptr);

// Copies `values` into a new tensor of shape `sizes` (default: 1-d). dtype defaults to T's.
template <typename T>
Tensor tensor(const std::vector<T>& values, Dims sizes = {}, TensorOptions options = {}) {
  if (sizes.empty()) sizes = {static_cast<int64_t>(values.size())};
  std::vector<T> host(values.begin(), values.end());
  TensorOptions host_options{.dtype = dtype_of_v<T>};
  const Tensor wrapped = from_blob(host.data(), sizes, host_options);
  KILN_CHECK(wrapped.numel() == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
             " values for shape ", sizes);
  Tensor result = wrapped.to(options.device, options.dtype.value_or(dtype_of_v<T>),
                             /*non_blocking=*/false, /*copy=*/true);
  if (options.requires_grad) result.requires_grad_(true);
  return result;
}
// vector<bool> has no contiguous storage: go through uint8.
template <>
Tensor tensor<bool>(const std::vector<bool>& values, Dims sizes, TensorOptions options);

}  // namespace kiln
