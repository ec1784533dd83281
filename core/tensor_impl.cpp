// TensorImpl construction and the shape arithmetic every tensor needs.
#include "core/tensor_impl.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/autograd/node.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace kiln {

TensorImpl::TensorImpl(Storage storage_, int64_t storage_offset_, Dims sizes_, Dims strides_, DType dtype_,
                       Device device_)
    : storage(std::move(storage_)),
      storage_offset(storage_offset_),
      sizes(std::move(sizes_)),
      strides(std::move(strides_)),
      dtype(dtype_),
      device(device_) {
  KILN_ASSERT(sizes.size() == strides.size(), "sizes ", sizes, " and strides ", strides);
  refresh_layout();
}

TensorImpl::TensorImpl(Layout layout, Storage storage_, int64_t storage_offset_, Dims sizes_, Dims strides_,
                       DType dtype_, Device device_)
    : storage(std::move(storage_)),
      storage_offset(storage_offset_),
      sizes(std::move(sizes_)),
      strides(std::move(strides_)),
      dtype(dtype_),
      device(device_),
      numel_(layout.numel),
      contiguous_(layout.contiguous) {}

TensorImpl::~TensorImpl() = default;

void TensorImpl::refresh_layout() {
  // Every tensor's sizes passed checked_numel when it was made, so the product fits int64
  // unless a size is 0, and then the product of the others may not: test for 0 first.
  numel_ = 0;
  if (std::find(sizes.begin(), sizes.end(), 0) == sizes.end()) {
    numel_ = 1;
    for (int64_t s : sizes) numel_ *= s;
  }
  contiguous_ = is_row_major(sizes, strides, numel_);
}

bool is_row_major(IntList sizes, IntList strides, int64_t numel) {
  // Empty: contiguous whatever the strides, and the other sizes' product may not fit int64.
  if (numel == 0) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (strides[i] != expected) return false;
    expected *= sizes[i];  // a product of sizes that checked_numel bounded
  }
  return true;
}

Dims contiguous_strides(IntList sizes) {
  Dims strides(sizes.size(), 0);
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    // Shapes whose element count overflows int64 are rejected by checked_numel; saturate
    // rather than overflow (undefined behaviour) when asked for their strides first.
    stride = checked_mul(stride, std::max<int64_t>(sizes[i], 1)).value_or(INT64_MAX);
  }
  return strides;
}

int64_t checked_numel(IntList sizes, const char* op) {
  for (const int64_t size : sizes) KILN_CHECK(size >= 0, op, ": negative dimension in size ", Dims(sizes));
  // A zero anywhere makes the count 0, however large the other sizes ([0, 2^62, 2^62] is
  // a valid empty tensor), so the order of the sizes cannot decide whether it overflows.
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  int64_t n = 1;
  for (const int64_t size : sizes) {
    const std::optional<int64_t> product = checked_mul(n, size);
    KILN_CHECK(product, op, ": size ", Dims(sizes), " has more than 2^63 - 1 elements");
    n = *product;
  }
  return n;
}

int64_t checked_span(IntList sizes, IntList strides, const char* op) {
  KILN_CHECK(sizes.size() == strides.size(), op, ": ", sizes.size(), " sizes but ", strides.size(), " strides");
  for (const int64_t stride : strides) KILN_CHECK(stride >= 0, op, ": negative stride in ", Dims(strides));
  if (checked_numel(sizes, op) == 0) return 0;
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::optional<int64_t> reach = checked_mul(sizes[i] - 1, strides[i]);
    const std::optional<int64_t> sum = reach ? checked_add(span, *reach) : std::nullopt;
    KILN_CHECK(sum, op, ": size ", Dims(sizes), " with strides ", Dims(strides), " addresses more than 2^63 - 1 elements");
    span = *sum;
  }
  return span;
}

int64_t checked_nbytes(int64_t elements, DType dtype, const char* op) {
  const std::optional<int64_t> bytes = checked_mul(elements, static_cast<int64_t>(itemsize(dtype)));
  KILN_CHECK(bytes, op, ": ", elements, " elements of ", dtype, " are more than 2^63 - 1 bytes");
  return *bytes;
}

void check_within_storage(IntList sizes, IntList strides, int64_t storage_offset, DType dtype, size_t storage_nbytes,
                          const char* op) {
  KILN_CHECK(storage_offset >= 0, op, ": negative storage offset ", storage_offset);
  const int64_t span = checked_span(sizes, strides, op);
  if (span == 0) return;
  const std::optional<int64_t> end = checked_add(storage_offset, span);
  const std::optional<int64_t> end_bytes = end ? checked_mul(*end, static_cast<int64_t>(itemsize(dtype)))
                                               : std::nullopt;
  KILN_CHECK(end_bytes && static_cast<uint64_t>(*end_bytes) <= storage_nbytes, op, ": size ", Dims(sizes),
             " with strides ", Dims(strides), " at offset ", storage_offset, " reaches past the end of its storage (",
             storage_nbytes / itemsize(dtype), " elements of ", dtype, ")");
}

}  // namespace kiln
