// Memory formats: the orders a dense tensor's elements may lie in memory with the same
// logical sizes, as PyTorch names them (torch.contiguous_format, channels_last,
// channels_last_3d).
//
// Note [Memory formats]: a 5-d activation [N, C, D, H, W] is Contiguous when W is
// innermost (NCDHW in memory, strides [CDHW, DHW, HW, W, 1]) and ChannelsLast3d when C is
// (NDHWC in memory, strides [DHWC, 1, HWC, WC, C]); ChannelsLast is the same for 4-d
// [N, C, H, W]. The sizes, and so every op's meaning, are the same in both: only the
// strides say which one a tensor is. Channels-last is what cuDNN's fastest 3D
// convolutions read and write, and what keeps a per-channel operation (batch norm's
// apply, a bias) a run over C contiguous values.
//
// The rules follow PyTorch's (c10's TensorImpl), checked against numbers PyTorch produced
// (tests/core/memory_format/make_fixtures.py):
//   - is_contiguous_as(format): the strides are the format's dense ones, where the stride
//     of a size-1 dim is ignored (any value will do; it never moves to another element).
//   - suggest_memory_format: ChannelsLast(3d) when the strides order the dims as the
//     format does (C, then W, H, (D), N, from innermost out), without being dense;
//     ambiguous tensors (a single channel, say: NCDHW and NDHWC are the same bytes) are
//     Contiguous, PyTorch's default.
//
//   const Tensor x = input.contiguous(MemoryFormat::ChannelsLast3d);  // NDHWC in memory
//   x.sizes();                                    // still [N, C, D, H, W]
//   x.is_contiguous();                            // false (unless it is ambiguous)
//   x.is_contiguous(MemoryFormat::ChannelsLast3d) // true
#pragma once

#include <cstdint>
#include <iosfwd>

#include "core/dims.h"

namespace kiln {

enum class MemoryFormat : uint8_t { Contiguous, ChannelsLast, ChannelsLast3d };

// "contiguous", "channels_last", "channels_last_3d" (PyTorch's names).
const char* memory_format_name(MemoryFormat format);
std::ostream& operator<<(std::ostream& os, MemoryFormat format);

// The rank a format is defined for: 4 for ChannelsLast, 5 for ChannelsLast3d, and 0 for
// Contiguous (any rank).
int memory_format_rank(MemoryFormat format);

// The dense strides, in elements, of a tensor of `sizes` laid out in `format`. A rank the
// format is not defined for is a kiln::Error naming `op`.
Dims memory_format_strides(IntList sizes, MemoryFormat format, const char* op);

// Whether `strides` are `format`'s dense strides for `sizes`, size-1 dims' strides aside.
// False for a rank the format is not defined for.
bool is_contiguous_as(IntList sizes, IntList strides, MemoryFormat format);

// The format whose dim order the strides follow (Note [Memory formats]): ChannelsLast
// for 4-d and ChannelsLast3d for 5-d strides ordered like theirs, else Contiguous.
MemoryFormat suggest_memory_format(IntList sizes, IntList strides);

}  // namespace kiln
