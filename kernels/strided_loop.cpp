// Building the coalesced strided loop of both elementwise engines (see the header).
#include "kernels/strided_loop.h"

#include <algorithm>

#include "core/error.h"

namespace kiln {
namespace {

// Note [Loops in memory order]: an elementwise result does not depend on the order its
// elements are visited in, but coalescing does: a channels-last tensor's dims, visited
// as N, C, D, H, W, never merge (C is innermost in memory), and the loop would run
// strided over every element. So before coalescing, the dims are put in the order the
// operands lie in memory, outermost first: dim a goes outside dim b when the first
// operand that tells them apart (output first, then the inputs; an operand broadcast
// along either, stride 0, does not tell) has the larger stride along a. Dims no operand
// tells apart keep their order (the insertion sort is stable), so a row-major loop is
// left as it was. Then channels-last operands coalesce to one dim, as contiguous ones do.
//
// -1 when `a` goes outside `b`, 1 when inside, 0 when no operand tells.
int compare_in_memory(int64_t a, int64_t b, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands) {
    const int64_t sa = t->strides()[a], sb = t->strides()[b];
    if (sa == 0 || sb == 0 || sa == sb) continue;
    return sa > sb ? -1 : 1;
  }
  return 0;
}

// An insertion sort that looks past dims it cannot compare with the one moving outwards
// (a broadcast dim between two others must not stop them from being put in order).
void order_by_memory(int64_t* dims, int count, std::initializer_list<const Tensor*> operands) {
  for (int i = 1; i < count; ++i) {
    int moving = i;
    for (int j = i - 1; j >= 0; --j) {
      const int order = compare_in_memory(dims[j], dims[moving], operands);
      if (order < 0) break;
      if (order > 0) {
        std::swap(dims[j], dims[moving]);
        moving = j;
      }
    }
  }
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
