// TensorImpl construction and the shape arithmetic every tensor needs.
#include "core/tensor_impl.h"

#include <algorithm>
#include <cstdint>

#include "core/autograd/node.h"
#include "core/error.h"

namespace kiln {

TensorImpl::TensorImpl(Storage storage_, int64_t storage_offset_, std::vector<int64_t> sizes_,
                       std::vector<int64_t> strides_, DType dtype_, Device device_)
    : storage(std::move(storage_)),
      storage_offset(storage_offset_),
      sizes(std::move(sizes_)),
      strides(std::move(strides_)),
      dtype(dtype_),
      device(device_) {
  KILN_ASSERT(sizes.size() == strides.size(), "sizes ", sizes, " and strides ", strides);
}

TensorImpl::~TensorImpl() = default;

int64_t TensorImpl::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorImpl::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (strides[i] != expected) return numel() == 0;
    expected *= sizes[i];
  }
  return true;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    // Shapes whose element count overflows int64 are rejected by checked_numel; saturate
    // rather than overflow (undefined behaviour) when asked for their strides first.
    if (__builtin_mul_overflow(stride, std::max<int64_t>(sizes[i], 1), &stride)) stride = INT64_MAX;
  }
  return strides;
}

int64_t checked_numel(const std::vector<int64_t>& sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, op, ": negative dimension in size ", sizes);
    KILN_CHECK(!__builtin_mul_overflow(n, s, &n), op, ": size ", sizes, " overflows int64");
  }
  return n;
}

}  // namespace kiln
