// How an [N, C, *] operand of a per-channel kernel (batch norm, pooling) lies in memory,
// for both backends: channels first (row-major NC<spatial>: N * C runs of S values, S the
// spatial volume) or channels last (NDHWC / NHWC: N * S rows of C values; Note [Memory
// formats] in core/memory_format.h). A tensor that is both (one channel, or no spatial
// extent) counts as channels first: either view reads the same bytes.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/memory_format.h"
#include "core/tensor.h"

namespace kiln {

enum class ChannelOrder : uint8_t { First, Last };

// The order of `t`, which must be one of the two (`op` names the kernel in the assertion).
inline ChannelOrder channel_order(const Tensor& t, const char* op) {
  if (is_channels_last_only(t.sizes(), t.strides())) return ChannelOrder::Last;
  KILN_ASSERT(t.is_contiguous(), op, ": operand ", t.sizes(), " with strides ", t.strides(),
              " is neither contiguous nor channels-last");
  return ChannelOrder::First;
}

// Whether `t` lies in memory as an operand of `order` does (of the same sizes).
inline bool has_channel_order(const Tensor& t, ChannelOrder order) {
  return order == ChannelOrder::Last ? t.is_contiguous(channels_last_format(t.dim())) : t.is_contiguous();
}

// Checks that the [N, C, s...] operands `in` and `out` of a pooling kernel share a dtype
// and one layout, and returns whether it is channels-last; `indices` (max pooling; may be
// null) must be Int64 laid out as `out` (a size-1 dim's stride may differ: a batch of one
// is channels-last and contiguous whatever its batch stride).
inline bool check_pool_operands(const Tensor& in, const Tensor& out, const Tensor* indices, const char* op) {
  KILN_ASSERT(in.dtype() == out.dtype() && in.dim() == out.dim() && in.dim() >= 3 && in.dim() <= 5 &&
                  in.device() == out.device(),
              op, ": expected [N, C, s...] tensors of one dtype and device, got ", in.sizes(), " ",
              in.dtype(), " and ", out.sizes(), " ", out.dtype());
  const ChannelOrder order = channel_order(in, op);
  KILN_ASSERT(has_channel_order(out, order), op, ": operands ", in.sizes(), " (strides ", in.strides(),
              ") and ", out.sizes(), " (strides ", out.strides(), ") are not in one layout");
  KILN_ASSERT(!indices || (indices->dtype() == DType::Int64 && indices->sizes() == out.sizes() &&
                           same_strides_where_it_matters(out.sizes(), indices->strides(), out.strides())),
              op, ": indices must be Int64 laid out as the output ", out.sizes());
  return order == ChannelOrder::Last;
}

}  // namespace kiln
