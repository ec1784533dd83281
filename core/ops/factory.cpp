// Factories: allocation through the device's backend, then a fill/arange kernel there.
#include "core/ops/factory.h"

#include <cmath>

#include "core/backend.h"
#include "core/ops/elementwise.h"

namespace kiln {
namespace {

DType default_dtype_of(Scalar value) {
  return value.kind() == DType::Bool ? DType::Bool
         : value.is_floating()       ? kDefaultFloat
                                     : DType::Int64;
}

Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

// The device's allocator, or the pinned host allocator of the CUDA backend.
Allocator& allocator_for(const TensorOptions& options) {
  if (!options.pin_memory) return backend(options.device).allocator(options.device.index);
  KILN_CHECK(options.device.is_cpu(), "pin_memory: only CPU tensors can be pinned, asked for ", options.device);
  KILN_CHECK(cuda_is_available(), "pin_memory: pinned host memory needs CUDA, which is not available (",
             "drop pin_memory on this machine)");
  Allocator* pinned = backend(Device::cuda()).pinned_allocator();
  KILN_CHECK(pinned != nullptr, "pin_memory: the CUDA backend has no pinned allocator");
  return *pinned;
}

}  // namespace

Tensor empty_strided(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                     TensorOptions options) {
  KILN_CHECK(sizes.size() == strides.size(), "empty_strided: ", sizes.size(), " sizes but ",
             strides.size(), " strides");
  checked_numel(sizes, "empty");
  const DType dtype = options.dtype.value_or(kDefaultFloat);
  int64_t span = 1;  // elements from the first to one past the last
  for (size_t i = 0; i < sizes.size(); ++i) {
    KILN_CHECK(strides[i] >= 0, "empty_strided: negative stride in ", strides);
    if (sizes[i] == 0) span = 0;
  }
  if (span != 0) {
    for (size_t i = 0; i < sizes.size(); ++i) span += (sizes[i] - 1) * strides[i];
  }
  Storage storage = Storage::allocate(allocator_for(options), static_cast<size_t>(span) * itemsize(dtype));
  auto impl = std::make_shared<TensorImpl>(std::move(storage), 0, sizes, strides, dtype, options.device);
  return finish(Tensor(std::move(impl)), options);
}

Tensor empty(const std::vector<int64_t>& sizes, TensorOptions options) {
  return empty_strided(sizes, contiguous_strides(sizes), options);
}

Tensor full(const std::vector<int64_t>& sizes, Scalar value, TensorOptions options) {
  TensorOptions o = options;
  o.dtype = options.dtype.value_or(default_dtype_of(value));
  o.requires_grad = false;
  value.check_representable(*o.dtype, "full");
  Tensor t = empty(sizes, o);
  if (t.numel() > 0) backend(t.device()).fill(t, value);
  return finish(t, options);
}

Tensor zeros(const std::vector<int64_t>& sizes, TensorOptions options) {
  options.dtype = options.dtype.value_or(kDefaultFloat);
  return full(sizes, 0, options);
}

Tensor ones(const std::vector<int64_t>& sizes, TensorOptions options) {
  options.dtype = options.dtype.value_or(kDefaultFloat);
  return full(sizes, 1, options);
}

Tensor scalar_tensor(Scalar value, TensorOptions options) { return full({}, value, options); }

namespace {
TensorOptions like_options(const Tensor& like, TensorOptions options) {
  KILN_CHECK(like.defined(), "*_like: undefined tensor");
  options.dtype = options.dtype.value_or(like.dtype());
  options.device = like.device();
  return options;
}
}  // namespace

Tensor empty_like(const Tensor& like, TensorOptions options) {
  return empty(like.sizes(), like_options(like, options));
}

Tensor full_like(const Tensor& like, Scalar value, TensorOptions options) {
  return full(like.sizes(), value, like_options(like, options));
}

Tensor zeros_like(const Tensor& like, TensorOptions options) { return full_like(like, 0, options); }
Tensor ones_like(const Tensor& like, TensorOptions options) { return full_like(like, 1, options); }

Tensor arange(Scalar end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options) {
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const DType dtype = options.dtype.value_or(integral ? DType::Int64 : kDefaultFloat);
  int64_t n = 0;
  if (integral) {
    KILN_CHECK(step.to_int() != 0, "arange: step must be nonzero");
    const int64_t span = end.to_int() - start.to_int();
    const int64_t s = step.to_int();
    n = span == 0 || (span > 0) != (s > 0) ? 0 : (span + s + (s > 0 ? -1 : 1)) / s;
  } else {
    const double s = step.to_double();
    KILN_CHECK(s != 0.0 && std::isfinite(s), "arange: step must be finite and nonzero, got ", s);
    KILN_CHECK(std::isfinite(start.to_double()) && std::isfinite(end.to_double()),
               "arange: start and end must be finite");
    n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end.to_double() - start.to_double()) / s)));
  }
  TensorOptions o = options;
  o.dtype = dtype;
  o.requires_grad = false;
  Tensor t = empty({n}, o);
  if (n > 0) backend(t.device()).arange(t, start, step);
  return finish(t, options);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  KILN_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  TensorOptions o = options;
  o.dtype = options.dtype.value_or(kDefaultFloat);
  o.requires_grad = false;
  Tensor t = empty({steps}, o);
  if (steps > 0) {
    const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
    backend(t.device()).arange(t, start, step);
  }
  return finish(t, options);
}

Tensor eye(int64_t n, TensorOptions options) {
  KILN_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  TensorOptions o = options;
  o.requires_grad = false;
  Tensor t = zeros({n, n}, o);
  if (n > 0) backend(t.device()).fill(t.as_strided({n}, {n + 1}, 0), 1);
  return finish(t, options);
}

Tensor from_blob(void* data, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                 TensorOptions options, std::function<void(void*)> deleter) {
  KILN_CHECK(sizes.size() == strides.size(), "from_blob: ", sizes.size(), " sizes but ",
             strides.size(), " strides");
  const int64_t n = checked_numel(sizes, "from_blob");
  KILN_CHECK(data != nullptr || n == 0, "from_blob: null data for ", n, " elements");
  const DType dtype = options.dtype.value_or(kDefaultFloat);
  int64_t span = n == 0 ? 0 : 1;
  for (size_t i = 0; i < sizes.size() && n > 0; ++i) {
    KILN_CHECK(strides[i] >= 0, "from_blob: negative stride in ", strides);
    span += (sizes[i] - 1) * strides[i];
  }
  Storage storage(DataPtr{data, std::move(deleter), options.device}, static_cast<size_t>(span) * itemsize(dtype));
  auto impl = std::make_shared<TensorImpl>(std::move(storage), 0, sizes, strides, dtype, options.device);
  return finish(Tensor(std::move(impl)), options);
}

Tensor from_blob(void* data, const std::vector<int64_t>& sizes, TensorOptions options,
                 std::function<void(void*)> deleter) {
  return from_blob(data, sizes, contiguous_strides(sizes), options, std::move(deleter));
}

template <>
Tensor tensor<bool>(const std::vector<bool>& values, std::vector<int64_t> sizes, TensorOptions options) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  options.dtype = options.dtype.value_or(DType::Bool);
  return tensor<uint8_t>(bytes, std::move(sizes), options);
}

}  // namespace kiln
