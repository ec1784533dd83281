// TensorImpl: the data behind a Tensor handle.
//
// A tensor is a strided view of a Storage: element (i0, i1, ...) lives at
// storage.data() + (storage_offset + sum_k ik * strides[k]) * itemsize. Strides are in
// elements and may be zero (expand) or any non-negative value (permute, slice with a
// step). Views share the storage and the version counter of their base (Note [Version
// counter] in core/tensor.h, kept in the Storage); autograd state lives in `autograd`, made
// only when needed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/dims.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace kiln {

namespace autograd {
struct AutogradMeta;
}

struct TensorImpl {
  TensorImpl(Storage storage, int64_t storage_offset, Dims sizes, Dims strides, DType dtype, Device device);
  // A tensor whose element count and contiguity the caller knows already (Note [Cached
  // layout]): a factory's fresh tensor, a view with its base's elements.
  struct Layout {
    int64_t numel;
    bool contiguous;
  };
  TensorImpl(Layout layout, Storage storage, int64_t storage_offset, Dims sizes, Dims strides, DType dtype,
             Device device);
  ~TensorImpl();

  Storage storage;
  int64_t storage_offset = 0;
  Dims sizes;  // in place up to Dims::kInline dims (Note [Dims in place])
  Dims strides;
  DType dtype;
  Device device;
  std::unique_ptr<autograd::AutogradMeta> autograd;
  // For a view: the tensor it was made from (its own base, if that was a view too).
  std::shared_ptr<TensorImpl> view_base;
  // A 0-d tensor made from a C++ number (`x * 2`): it promotes as a wrapped number.
  bool wrapped_number = false;

  // Note [Cached layout]: the element count and whether the strides are row-major are
  // asked for many times per op, so they are computed once, when the sizes and strides are
  // set; whoever changes sizes or strides in place afterwards calls refresh_layout().
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return contiguous_; }
  void refresh_layout();

 private:
  int64_t numel_ = 0;
  bool contiguous_ = true;
};

// Row-major ("C order") strides for `sizes`.
Dims contiguous_strides(IntList sizes);
// Whether `strides` are row-major for `sizes` (a size-1 dim's stride never matters; an
// empty tensor of `numel` 0 is contiguous whatever its strides).
bool is_row_major(IntList sizes, IntList strides, int64_t numel);

// Note [Checked sizes]: every size, element count, span and byte count of a tensor is
// computed once, with overflow checks, when the tensor is made (factories, from_blob,
// views, file readers); an error names the op and the sizes. Afterwards every tensor
// satisfies: sizes >= 0, numel fits int64, strides >= 0, and offset + span elements fit in
// its storage. Kernels and shape code may then multiply sizes and strides freely.

// Product of sizes (0 if any is 0); throws naming `op` on a negative size or when the
// product overflows int64.
int64_t checked_numel(IntList sizes, const char* op);
// Elements from the first to one past the last that a tensor of `sizes` and `strides`
// addresses (0 when a size is 0); throws naming `op` on a negative stride or overflow.
int64_t checked_span(IntList sizes, IntList strides, const char* op);
// `elements` of `dtype` in bytes; throws naming `op` when that overflows int64.
int64_t checked_nbytes(int64_t elements, DType dtype, const char* op);
// Throws naming `op` unless a tensor of `sizes`, `strides` and `storage_offset` addresses
// only bytes inside a storage of `storage_nbytes` (checked when every view is made).
void check_within_storage(IntList sizes, IntList strides, int64_t storage_offset, DType dtype, size_t storage_nbytes,
                          const char* op);

}  // namespace kiln
