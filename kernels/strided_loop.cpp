// Building the coalesced strided loop of both elementwise engines (see the header).
#include "kernels/strided_loop.h"

#include <algorithm>

#include "core/error.h"
#include "core/memory_format.h"

namespace kiln {
namespace {

// Note [Loops in memory order]: an elementwise result does not depend on the order its
// elements are visited in, but coalescing does: a channels-last tensor's dims, visited
// as N, C, D, H, W, never merge (C is innermost in memory), and the loop would run
// strided over every element. So before coalescing, the dims are put in the order the
// operands lie in memory (Note [Memory order of dims] in core/memory_format.h, the output
// first, then the inputs). A row-major loop is left as it was, and channels-last operands
// coalesce to one dim, as contiguous ones do.
void order_by_memory(int64_t* outermost_first, int count, std::initializer_list<const Tensor*> operands) {
  std::array<IntList, kMaxOperands> strides;
  size_t n = 0;
  for (const Tensor* t : operands) strides[n++] = t->strides();
  std::reverse(outermost_first, outermost_first + count);
  order_dims_innermost_first(std::span<int64_t>(outermost_first, static_cast<size_t>(count)),
                             (*operands.begin())->sizes(), std::span<const IntList>(strides.data(), n));
  std::reverse(outermost_first, outermost_first + count);
}

}  // namespace

StridedLoop make_strided_loop(std::initializer_list<const Tensor*> operands) {
  StridedLoop loop;
  loop.noperands = static_cast<int>(operands.size());
  KILN_ASSERT(loop.noperands <= kMaxOperands, "too many operands");
  const Tensor& out = **operands.begin();
  // The common case first: every operand contiguous (same shape): one dim of numel.
  if (std::all_of(operands.begin(), operands.end(), [](const Tensor* t) { return t->is_contiguous(); })) {
    loop.numel = out.numel();
    loop.ndim = loop.numel == 1 ? 0 : 1;
    loop.sizes[0] = loop.numel;
    int k = 0;
    for (const Tensor* t : operands) {
      loop.byte_strides[k][0] = static_cast<int64_t>(t->element_size());
      loop.data[k++] = static_cast<char*>(t->data_ptr());
    }
    return loop;
  }
  const int64_t ndim = out.dim();
  // Keep only dims of size != 1, outermost first. The scratch arrays below are not
  // zero-filled: each entry is written before it is read, and filling 3 KiB per call was
  // a quarter of a small op's host cost (bench/host_cost).
  std::array<int64_t, 64> dims;
  int kept = 0;
  KILN_CHECK(ndim <= 64, "elementwise: at most 64 dimensions are supported, got ", ndim);
  for (int64_t d = 0; d < ndim; ++d)
    if (out.sizes()[d] != 1) dims[kept++] = d;
  order_by_memory(dims.data(), kept, operands);
  // Coalesce from the innermost outwards.
  int nd = 0;
  std::array<int64_t, 64> sizes;
  std::array<std::array<int64_t, 64>, kMaxOperands> strides;
  for (int j = kept - 1; j >= 0; --j) {
    const int64_t d = dims[j];
    const int64_t size = out.sizes()[d];
    bool merge = nd > 0;
    int k = 0;
    for (const Tensor* t : operands) {
      const int64_t s = t->strides()[d] * static_cast<int64_t>(t->element_size());
      if (merge && s != strides[k][nd - 1] * sizes[nd - 1]) merge = false;
      ++k;
    }
    if (merge) {
      sizes[nd - 1] *= size;
      continue;
    }
    k = 0;
    for (const Tensor* t : operands) {
      strides[k][nd] = t->strides()[d] * static_cast<int64_t>(t->element_size());
      ++k;
    }
    sizes[nd++] = size;
  }
  KILN_CHECK(nd <= kMaxDims, "elementwise: at most ", kMaxDims,
             " non-mergeable dimensions are supported, got ", nd);
  loop.ndim = nd;
  // Stored outermost first.
  for (int i = 0; i < nd; ++i) {
    loop.sizes[i] = sizes[nd - 1 - i];
    for (int k = 0; k < loop.noperands; ++k) loop.byte_strides[k][i] = strides[k][nd - 1 - i];
  }
  int k = 0;
  for (const Tensor* t : operands) loop.data[k++] = static_cast<char*>(t->data_ptr());
  loop.numel = out.numel();
  return loop;
}

}  // namespace kiln
