// The reduction layout (reduce_layout.h): drop, group, sort, merge.
#include "kernels/reduce_layout.h"

#include <algorithm>

#include "core/error.h"

namespace kiln {
namespace {

int64_t numel_of(const ReduceDims& group) {
  int64_t n = 1;
  for (const ReduceDim& dim : group) n *= dim.size;
  return n;
}

}  // namespace

ReduceDims coalesce_dims(ReduceDims group) {
  // An insertion sort: stable, and with a tensor's handful of dims faster than
  // std::stable_sort, which allocates a buffer on every call (bench/host_cost).
  for (size_t i = 1; i < group.size(); ++i) {
    const ReduceDim dim = group[i];
    size_t j = i;
    for (; j > 0 && group[j - 1].strides[0] < dim.strides[0]; --j) group[j] = group[j - 1];
    group[j] = dim;
  }
  // Merge in place: group[0, merged) holds the dims kept so far.
  size_t merged = 0;
  for (const ReduceDim& dim : group) {
    if (merged > 0) {
      ReduceDim& outer = group[merged - 1];
      bool contiguous = true;
      for (int k = 0; k < 3; ++k) contiguous = contiguous && outer.strides[k] == dim.strides[k] * dim.size;
      if (contiguous) {
        outer.size *= dim.size;
        outer.strides = dim.strides;
        continue;
      }
    }
    group[merged++] = dim;
  }
  group.resize(merged);
  if (group.empty()) group.push_back(ReduceDim{});
  return group;
}

ReduceLayout make_reduce_layout(IntList sizes, IntList in_strides, IntList out0_strides, IntList out1_strides,
                                IntList reduce_dims) {
  const size_t rank = sizes.size();
  KILN_ASSERT(in_strides.size() == rank && out0_strides.size() == rank &&
                  (out1_strides.empty() || out1_strides.size() == rank),
              "reduce: operands of different ranks");
  ReduceDims kept, reduced;
  kept.reserve(std::max<size_t>(rank, 1));  // an empty group gets one size-1 dim
  reduced.reserve(std::max<size_t>(rank, 1));
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] == 1) continue;
    if (std::binary_search(reduce_dims.begin(), reduce_dims.end(), static_cast<int64_t>(d))) {
      reduced.push_back({sizes[d], {in_strides[d], 0, 0}});
    } else {
      kept.push_back({sizes[d], {in_strides[d], out0_strides[d], out1_strides.empty() ? 0 : out1_strides[d]}});
    }
  }
  const bool has_kept = !kept.empty(), has_reduced = !reduced.empty();
  ReduceLayout layout;
  layout.kept = coalesce_dims(std::move(kept));
  layout.reduced = coalesce_dims(std::move(reduced));
  layout.kept_numel = numel_of(layout.kept);
  layout.reduced_numel = numel_of(layout.reduced);
  layout.outer = has_kept && (!has_reduced || layout.kept.back().strides[0] < layout.reduced.back().strides[0]);
  return layout;
}

}  // namespace kiln
