// Factories: allocation through the device's backend, then a fill/arange kernel there.
#include "core/ops/factory.h"

#include <algorithm>
#include <cmath>

#include "core/backend.h"
#include "core/checked_math.h"
#include "core/memory_format.h"
#include "core/ops/elementwise.h"
#include "core/pooled.h"

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

// The one allocation behind every factory, named `op` in its errors: sizes and strides
// checked (Note [Checked sizes]), then exactly the bytes they span from the allocator.
// The vectors are taken by value and moved into the TensorImpl: no copies on the hot path.
Tensor allocate_strided(Dims sizes, Dims strides, const TensorOptions& options,
                        const char* op) {
  const DType dtype = options.dtype.value_or(kDefaultFloat);
  const int64_t nbytes = checked_nbytes(checked_span(sizes, strides, op), dtype, op);
  Storage storage = Storage::allocate(allocator_for(options), static_cast<size_t>(nbytes));
  auto impl = make_pooled<TensorImpl>(std::move(storage), 0, std::move(sizes), std::move(strides), dtype,
                                           options.device);
  return finish(Tensor(std::move(impl)), options);
}

Tensor full_named(const Dims& sizes, Scalar value, const TensorOptions& options,
                  const char* op) {
  TensorOptions o = options;
  o.dtype = options.dtype.value_or(default_dtype_of(value));
  o.requires_grad = false;
  value.check_representable(*o.dtype, op);
  Tensor t = empty(sizes, o, op);
  if (t.numel() > 0) backend(t.device()).fill(t, value);
  return finish(t, options);
}

}  // namespace

Tensor empty_strided(const Dims& sizes, const Dims& strides,
                     TensorOptions options) {
  return allocate_strided(sizes, strides, options, "empty_strided");
}

Tensor empty(const Dims& sizes, TensorOptions options, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return empty(sizes, options);
  return allocate_strided(sizes, memory_format_strides(sizes, format, "empty"), options, "empty");
}

// contiguous_strides saturates for sizes whose count overflows; checked_span refuses them.
// A contiguous tensor spans exactly its elements: its count is checked once, and its
// strides need no overflow checks past it.
Tensor empty(Dims sizes, TensorOptions options, const char* op) {
  const DType dtype = options.dtype.value_or(kDefaultFloat);
  const int64_t numel = checked_numel(sizes, op);
  const int64_t nbytes = checked_nbytes(numel, dtype, op);
  Dims strides;
  if (numel == 0) {
    strides = contiguous_strides(sizes);  // the other sizes' product may overflow: saturated there
  } else {
    strides.resize(sizes.size());
    int64_t stride = 1;
    for (size_t i = sizes.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= sizes[i];  // a product of sizes that checked_numel bounded
    }
  }
  Storage storage = Storage::allocate(allocator_for(options), static_cast<size_t>(nbytes));
  auto impl = make_pooled<TensorImpl>(TensorImpl::Layout{.numel = numel, .contiguous = true}, std::move(storage), 0,
                                      std::move(sizes), std::move(strides), dtype, options.device);
  return finish(Tensor(std::move(impl)), options);
}

Tensor empty(Dims sizes, TensorOptions options) { return empty(std::move(sizes), options, "empty"); }

Tensor full(const Dims& sizes, Scalar value, TensorOptions options) {
  return full_named(sizes, value, options, "full");
}

Tensor zeros(const Dims& sizes, TensorOptions options) {
  options.dtype = options.dtype.value_or(kDefaultFloat);
  return full_named(sizes, 0, options, "zeros");
}

Tensor ones(const Dims& sizes, TensorOptions options) {
  options.dtype = options.dtype.value_or(kDefaultFloat);
  return full_named(sizes, 1, options, "ones");
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

// like_options checks `like` first: C++ leaves the order of function arguments unspecified
// (GCC happened to evaluate like.sizes() last, Clang first, throwing a different error).
Tensor empty_preserving(const Tensor& like, TensorOptions options) {
  if (like.is_contiguous() && like.strides() == contiguous_strides(like.sizes())) {
    return empty(like.sizes(), options);
  }
  return empty_strided(like.sizes(), preserved_strides(like.sizes(), like.strides()), options);
}

Tensor empty_like(const Tensor& like, TensorOptions options) {
  const TensorOptions resolved = like_options(like, options);
  return empty_preserving(like, resolved);
}

Tensor full_like(const Tensor& like, Scalar value, TensorOptions options) {
  TensorOptions resolved = like_options(like, options);
  resolved.dtype = options.dtype.value_or(like.dtype());
  resolved.requires_grad = false;
  value.check_representable(*resolved.dtype, "full_like");
  Tensor t = empty_preserving(like, resolved);
  if (t.numel() > 0) backend(t.device()).fill(t, value);
  return finish(t, options);
}

Tensor zeros_like(const Tensor& like, TensorOptions options) { return full_like(like, 0, options); }
Tensor ones_like(const Tensor& like, TensorOptions options) { return full_like(like, 1, options); }

Tensor arange(Scalar end, TensorOptions options) { return arange(0, end, 1, options); }

namespace {

// ceil((end - start) / step) for integers, or 0 when the range is empty. The distance is
// taken in uint64, where it is exact for any int64 ends (end - start itself can overflow),
// so arange(INT64_MIN, INT64_MAX) is refused for its length, never wrapped.
int64_t integral_arange_length(int64_t start, int64_t end, int64_t step) {
  KILN_CHECK(step != 0, "arange: step must be nonzero");
  if (start == end || (end > start) != (step > 0)) return 0;
  const uint64_t distance = end > start ? static_cast<uint64_t>(end) - static_cast<uint64_t>(start)
                                        : static_cast<uint64_t>(start) - static_cast<uint64_t>(end);
  const uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const uint64_t length = distance / magnitude + (distance % magnitude != 0);
  KILN_CHECK(length <= static_cast<uint64_t>(INT64_MAX), "arange: ", length, " elements from ", start, " to ",
             end, " by ", step, " are more than 2^63 - 1");
  return static_cast<int64_t>(length);
}

int64_t floating_arange_length(double start, double end, double step) {
  KILN_CHECK(step != 0.0 && std::isfinite(step), "arange: step must be finite and nonzero, got ", step);
  KILN_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start and end must be finite, got ", start,
             " and ", end);
  const double length = std::ceil((end - start) / step);  // may be inf when end - start overflows
  if (!(length > 0)) return 0;
  KILN_CHECK(fits_integer<int64_t>(length), "arange: ", length, " elements from ", start, " to ", end, " by ",
             step, " are more than 2^63 - 1");
  return static_cast<int64_t>(length);
}

}  // namespace

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options) {
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const DType dtype = options.dtype.value_or(integral ? DType::Int64 : kDefaultFloat);
  const int64_t n = integral ? integral_arange_length(start.to_int(), end.to_int(), step.to_int())
                             : floating_arange_length(start.to_double(), end.to_double(), step.to_double());
  TensorOptions o = options;
  o.dtype = dtype;
  o.requires_grad = false;
  Tensor t = empty({n}, o, "arange");
  if (n > 0) backend(t.device()).arange(t, start, step);
  return finish(t, options);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  KILN_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  TensorOptions o = options;
  o.dtype = options.dtype.value_or(kDefaultFloat);
  o.requires_grad = false;
  Tensor t = empty({steps}, o, "linspace");
  if (steps > 0) {
    const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
    backend(t.device()).arange(t, start, step);
  }
  return finish(t, options);
}

Tensor eye(int64_t n, TensorOptions options) {
  KILN_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  TensorOptions o = options;
  o.dtype = options.dtype.value_or(kDefaultFloat);
  o.requires_grad = false;
  Tensor t = full_named({n, n}, 0, o, "eye");
  if (n > 0) backend(t.device()).fill(t.as_strided({n}, {n + 1}, 0), 1);
  return finish(t, options);
}

Tensor from_blob(void* data, const Dims& sizes, const Dims& strides,
                 TensorOptions options, std::function<void(void*)> deleter) {
  const DType dtype = options.dtype.value_or(kDefaultFloat);
  const int64_t span = checked_span(sizes, strides, "from_blob");
  const int64_t nbytes = checked_nbytes(span, dtype, "from_blob");
  KILN_CHECK(data != nullptr || span == 0, "from_blob: null data for ", checked_numel(sizes, "from_blob"),
             " elements");
  Storage storage(DataPtr{data, std::move(deleter), options.device}, static_cast<size_t>(nbytes));
  auto impl = make_pooled<TensorImpl>(std::move(storage), 0, sizes, strides, dtype, options.device);
  return finish(Tensor(std::move(impl)), options);
}

Tensor from_blob(void* data, const Dims& sizes, TensorOptions options,
                 std::function<void(void*)> deleter) {
  return from_blob(data, sizes, contiguous_strides(sizes), options, std::move(deleter));
}

template <>
Tensor tensor<bool>(const std::vector<bool>& values, Dims sizes, TensorOptions options) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  options.dtype = options.dtype.value_or(DType::Bool);
  return tensor<uint8_t>(bytes, std::move(sizes), options);
}

}  // namespace kiln
