// The memory formats' strides and the rules that recognise them (memory_format.h).
#include "core/memory_format.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <ostream>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/tensor_impl.h"

namespace kiln {
namespace {

// The dims of `format` from the innermost in memory outwards: C, then the spatial dims
// from the last, then N.
constexpr std::array<int64_t, 4> kChannelsLastOrder = {1, 3, 2, 0};
constexpr std::array<int64_t, 5> kChannelsLast3dOrder = {1, 4, 3, 2, 0};

IntList innermost_first(MemoryFormat format) {
  switch (format) {
    case MemoryFormat::ChannelsLast: return kChannelsLastOrder;
    case MemoryFormat::ChannelsLast3d: return kChannelsLast3dOrder;
    case MemoryFormat::Contiguous: break;
  }
  return {};
}

}  // namespace

const char* memory_format_name(MemoryFormat format) {
  switch (format) {
    case MemoryFormat::Contiguous: return "contiguous";
    case MemoryFormat::ChannelsLast: return "channels_last";
    case MemoryFormat::ChannelsLast3d: return "channels_last_3d";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, MemoryFormat format) { return os << memory_format_name(format); }

int memory_format_rank(MemoryFormat format) { return static_cast<int>(innermost_first(format).size()); }

Dims memory_format_strides(IntList sizes, MemoryFormat format, const char* op) {
  const int rank = memory_format_rank(format);
  KILN_CHECK(rank == 0 || static_cast<int>(sizes.size()) == rank, op, ": memory format ", format, " is for ",
             rank, "-d tensors, got one of shape ", Dims(sizes));
  if (rank == 0) return contiguous_strides(sizes);
  // As in PyTorch, a size-0 dim counts as 0 here (contiguous strides count it as 1); either
  // is right for a tensor with no elements.
  Dims strides(sizes.size(), 0);
  int64_t stride = 1;
  for (int64_t d : innermost_first(format)) {
    strides[static_cast<size_t>(d)] = stride;
    const std::optional<int64_t> next = checked_mul(stride, sizes[static_cast<size_t>(d)]);
    KILN_CHECK(next.has_value(), op, ": the strides of shape ", Dims(sizes), " overflow int64");
    stride = *next;
  }
  return strides;
}

bool is_contiguous_as(IntList sizes, IntList strides, MemoryFormat format) {
  const int rank = memory_format_rank(format);
  if (sizes.size() != strides.size() || (rank != 0 && static_cast<int>(sizes.size()) != rank)) return false;
  if (rank == 0) {  // the tensor's own rule (it is contiguous whatever its strides when empty)
    return is_row_major(sizes, strides, std::find(sizes.begin(), sizes.end(), 0) != sizes.end() ? 0 : 1);
  }
  int64_t expected = 1;
  for (int64_t dim : innermost_first(format)) {
    const size_t d = static_cast<size_t>(dim);
    if (sizes[d] == 1) continue;  // a size-1 dim's stride never matters
    if (strides[d] != expected) return false;
    // Past int64 (sizes of a tensor with no elements may multiply so) no stride can match.
    if (__builtin_mul_overflow(expected, sizes[d], &expected)) return false;
  }
  return true;
}

// PyTorch's "strides like channels-last": walking the format's dims from the innermost,
// each stride is at least the extent of those inside it; a broadcast channel dim, a dim of
// size 0, and N no further out than C (the [N, 1, 1, 1] ambiguity) say no.
MemoryFormat channels_last_format(int64_t rank) {
  return rank == 4   ? MemoryFormat::ChannelsLast
         : rank == 5 ? MemoryFormat::ChannelsLast3d
                     : MemoryFormat::Contiguous;
}

bool is_channels_last_only(IntList sizes, IntList strides) {
  const MemoryFormat format = channels_last_format(static_cast<int64_t>(sizes.size()));
  return format != MemoryFormat::Contiguous && is_contiguous_as(sizes, strides, format) &&
         !is_contiguous_as(sizes, strides, MemoryFormat::Contiguous);
}

MemoryFormat suggest_memory_format(IntList sizes, IntList strides) {
  const MemoryFormat format = sizes.size() == 4   ? MemoryFormat::ChannelsLast
                              : sizes.size() == 5 ? MemoryFormat::ChannelsLast3d
                                                  : MemoryFormat::Contiguous;
  if (format == MemoryFormat::Contiguous || strides.size() != sizes.size() || strides[1] == 0) {
    return MemoryFormat::Contiguous;
  }
  int64_t least = 0;
  for (int64_t d : innermost_first(format)) {
    const int64_t size = sizes[static_cast<size_t>(d)];
    const int64_t stride = strides[static_cast<size_t>(d)];
    if (size == 0 || stride < least) return MemoryFormat::Contiguous;
    if (d == 0 && least == strides[1]) return MemoryFormat::Contiguous;
    least = stride;
    // Past int64 (a hostile view's strides) no later stride can reach it: saturate.
    if (size > 1 && __builtin_mul_overflow(least, size, &least)) least = INT64_MAX;
  }
  return format;
}

bool is_non_overlapping_and_dense(IntList sizes, IntList strides) {
  if (sizes.size() != strides.size()) return false;
  Dims dims;  // the dims of size > 1, to be sorted by stride (in place up to Dims' inline size)
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return true;  // no elements: nothing overlaps, nothing is missing
    if (sizes[d] != 1) dims.push_back(static_cast<int64_t>(d));
  }
  std::sort(dims.begin(), dims.end(),
            [&](int64_t a, int64_t b) { return strides[static_cast<size_t>(a)] < strides[static_cast<size_t>(b)]; });
  int64_t expected = 1;
  for (const int64_t dim : dims) {
    const size_t d = static_cast<size_t>(dim);
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

Dims preserved_strides(IntList sizes, IntList strides) {
  if (is_non_overlapping_and_dense(sizes, strides)) return Dims(strides);
  const IntList own[] = {strides};
  Dims dense = dense_strides_in_memory_order(sizes, own);
  return dense.empty() ? contiguous_strides(sizes) : dense;
}

bool same_strides_where_it_matters(IntList sizes, IntList a, IntList b) {
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1 && a[d] != b[d]) return false;
  }
  return true;
}

namespace {

// 1 when `inner` (now inside `outer`) belongs outside it, -1 when it is right inside, 0
// when no operand tells (Note [Memory order of dims]).
int belongs_outside(int64_t inner, int64_t outer, IntList sizes, std::span<const IntList> operand_strides) {
  const size_t i = static_cast<size_t>(inner), o = static_cast<size_t>(outer);
  for (IntList strides : operand_strides) {
    if (strides[i] == 0 || strides[o] == 0) continue;
    if (strides[i] != strides[o]) return strides[i] > strides[o] ? 1 : -1;
    if (sizes[i] > sizes[o]) return 1;
  }
  return 0;
}

}  // namespace

void order_dims_innermost_first(std::span<int64_t> dims, IntList sizes, std::span<const IntList> operand_strides) {
  for (size_t i = 1; i < dims.size(); ++i) {
    size_t moving = i;  // where the dim being placed is now; it moves inwards
    for (size_t j = i; j-- > 0;) {
      const int order = belongs_outside(dims[j], dims[moving], sizes, operand_strides);
      if (order < 0) break;
      if (order > 0) {
        std::swap(dims[j], dims[moving]);
        moving = j;
      }
    }
  }
}

Dims dense_strides_in_memory_order(IntList sizes, std::span<const IntList> operand_strides) {
  Dims order(sizes.size(), 0);  // innermost first: row-major to begin with
  for (size_t i = 0; i < sizes.size(); ++i) order[i] = static_cast<int64_t>(sizes.size() - 1 - i);
  order_dims_innermost_first(order, sizes, operand_strides);
  bool row_major = true;
  for (size_t i = 0; i < order.size(); ++i) row_major = row_major && order[i] == static_cast<int64_t>(order.size() - 1 - i);
  if (row_major) return {};
  Dims strides(sizes.size(), 0);
  int64_t stride = 1;
  for (int64_t d : order) {
    strides[static_cast<size_t>(d)] = stride;
    const std::optional<int64_t> next = checked_mul(stride, std::max<int64_t>(sizes[static_cast<size_t>(d)], 1));
    KILN_CHECK(next.has_value(), "dense strides: shape ", Dims(sizes), " has more elements than int64 holds");
    stride = *next;
  }
  return strides;
}

namespace {
std::atomic<int64_t> layout_conversion_count{0};
}  // namespace

int64_t layout_conversions() { return layout_conversion_count.load(std::memory_order_relaxed); }

void count_layout_conversion(IntList sizes, IntList src_strides, IntList dst_strides) {
  if (channels_last_format(static_cast<int64_t>(sizes.size())) == MemoryFormat::Contiguous) return;
  if (same_strides_where_it_matters(sizes, src_strides, dst_strides)) return;  // the usual case: no work
  if (is_non_overlapping_and_dense(sizes, src_strides) && is_non_overlapping_and_dense(sizes, dst_strides)) {
    layout_conversion_count.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace kiln
