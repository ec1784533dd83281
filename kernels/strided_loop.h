// The coalesced loop shared by the CPU and CUDA elementwise engines.
//
// Operands arrive with one shape (broadcast already done by the op layer: stride 0 where
// an input is broadcast) and arbitrary strides. make_strided_loop drops size-1 dims and
// merges neighbouring dims that are contiguous with each other in every operand, so a
// contiguous tensor becomes one dim of numel elements and a transposed one stays two.
// Before merging, dims are put in the operands' memory order (Note [Loops in memory
// order] in strided_loop.cpp), so operands that are all channels-last become one dim too.
// Strides are in bytes (operands may have different dtypes); dims are outermost first.
// Built into kiln_cpu; kiln_cuda links it for its host-side launch planning.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "core/tensor.h"

namespace kiln {

inline constexpr int kMaxDims = 16;
inline constexpr int kMaxOperands = 4;

// Operands after coalescing; operand 0 is the output. Innermost dim last.
// Only the first `ndim` sizes and, for the first `noperands` operands, strides and data
// are meaningful; the rest of the arrays is left unset (zero-filling 640 bytes per op was
// a tenth of a small op's host cost, bench/host_cost).
struct StridedLoop {
  int ndim = 0;
  int noperands = 0;
  std::array<int64_t, kMaxDims> sizes;
  std::array<std::array<int64_t, kMaxDims>, kMaxOperands> byte_strides;
  std::array<char*, kMaxOperands> data;
  int64_t numel = 1;
};

// Builds the coalesced loop over `operands` (all of the same shape; [0] is the output).
StridedLoop make_strided_loop(std::initializer_list<const Tensor*> operands);

}  // namespace kiln
