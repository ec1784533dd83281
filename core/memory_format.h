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
#include <span>

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

// The channels-last format of a rank-`rank` tensor (ChannelsLast for 4, ChannelsLast3d
// for 5), Contiguous for a rank that has none.
MemoryFormat channels_last_format(int64_t rank);

// Whether the strides are dense channels-last and not also row-major (an ambiguous tensor,
// one channel or no spatial extent, is row-major: either view reads the same bytes).
bool is_channels_last_only(IntList sizes, IntList strides);

// Whether the elements are each at their own place and fill their span with no gaps, in
// some order of the dims (PyTorch's is_non_overlapping_and_dense): a permutation of a
// contiguous tensor is, a slice with a step or an expanded tensor is not.
bool is_non_overlapping_and_dense(IntList sizes, IntList strides);

// The strides a copy of a tensor keeps when its layout is preserved (PyTorch's
// preserve_format, what clone() and to() do): its own when it is non-overlapping and
// dense, else dense strides in its own dims' memory order (Note [Memory order of dims],
// PyTorch's infer_dense_strides), so a permuted and sliced tensor's copy stays permuted.
Dims preserved_strides(IntList sizes, IntList strides);

// Whether `a` and `b` have the same stride along every dim of size > 1 (a size-1 dim's
// stride never moves to another element): two tensors of `sizes` with the same layout.
bool same_strides_where_it_matters(IntList sizes, IntList a, IntList b);

// Note [Memory order of dims]: which dims lie outside which in memory, decided by a list
// of operands' strides (over the same sizes; a broadcast operand has stride 0 along the
// dims it repeats over). `dims`, innermost first, is sorted so that each dim is inside
// those the first operand that tells them apart says it is inside: the operand with the
// smaller stride along it, or of two equal strides, the smaller size goes inside; an
// operand with stride 0 along either dim does not tell. Dims no operand tells apart keep
// their places (an insertion sort that looks past them). This is PyTorch's
// TensorIterator order, so an elementwise result is laid out as PyTorch lays it out, and
// both backends' loops visit memory in this order (Note [Loops in memory order]).
void order_dims_innermost_first(std::span<int64_t> dims, IntList sizes, std::span<const IntList> operand_strides);

// The dense strides of a tensor of `sizes` whose dims lie in memory in the operands'
// order (order_dims_innermost_first over `operand_strides`); empty when that order is
// row-major, so the caller allocates as usual (contiguous_strides).
Dims dense_strides_in_memory_order(IntList sizes, std::span<const IntList> operand_strides);

// Note [Layout conversions]: a copy between two tensors of the same sizes that are each
// dense in a different layout (a channels-last tensor made row-major, or back) is a layout
// conversion: a pass over memory that a channels-last model should never need (counted
// for 4-d and 5-d tensors, the ranks memory formats are for; a matrix's transposed copy
// inside a matmul is not one). Every
// op-level copy (contiguous, clone, to, copy_; the backends' own work goes through them)
// counts the conversions it makes, process-wide, so a test can assert that a
// channels-last training step makes none. A copy of a strided view into a dense tensor
// (a gather) is not one.
int64_t layout_conversions();
// Counts the copy of a tensor of `sizes` from `src_strides` to `dst_strides` when it is
// a layout conversion.
void count_layout_conversion(IntList sizes, IntList src_strides, IntList dst_strides);

}  // namespace kiln
