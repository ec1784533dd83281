// vol2col and col2vol: the index math that turns a convolution into a matrix product
// (kernels/cpu/conv.cpp).
//
// Every convolution here is three-dimensional: a 1-d or 2-d one gets leading spatial dims
// of size 1 (kernel 1, stride 1, padding 0, dilation 1), which changes no index, so one
// walk serves 1-3 spatial dims. For one sample and one group, the column matrix is
//
//   col[(c, kd, kh, kw), p] = x[c, od sd - pd + kd dd, oh sh - ph + kh dh, ow sw - pw + kw dw]
//
// (zero where that input position lies in the padding), rows ordered (c, kd, kh, kw) like
// the weight's [C_in / groups, k...] and columns p = (od, oh, ow) like the output's
// spatial volume. Then output = weight [C_out / groups, rows] x col [rows, O].
//
// Both walks take a block of the column matrix, a range of rows by a range of columns
// [p_begin, p_end) (the caller bounds the buffer's size with it and splits work between
// threads by blocks), stored with its rows `ld` elements apart. The columns are cut into
// runs along the output's innermost dim (fixed od, oh); along a run, the input positions
// that fall inside the volume form one interval of output indices (Span), computed once
// per kernel offset, so the inner loops have no bounds checks. vol2col overwrites the
// block; col2vol adds the block into x (+=), because several (column, kernel offset)
// pairs land on the same input element.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace kiln::cpu {

// One group of one sample, as a 3-d problem. Index 0, 1, 2 = depth, height, width.
struct ConvGeometry {
  int64_t channels = 1;                // input channels of the group: C_in / groups
  std::array<int64_t, 3> in{1, 1, 1};  // input spatial sizes
  std::array<int64_t, 3> kernel{1, 1, 1};
  std::array<int64_t, 3> out{1, 1, 1};  // output spatial sizes
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> padding{0, 0, 0};
  std::array<int64_t, 3> dilation{1, 1, 1};

  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t kernel_volume() const { return kernel[0] * kernel[1] * kernel[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
  int64_t col_rows() const { return channels * kernel_volume(); }
  // 1x1 kernel, stride 1, no padding: the input of a group already is its column matrix.
  bool is_pointwise() const {
    for (int d = 0; d < 3; ++d) {
      if (kernel[d] != 1 || stride[d] != 1 || padding[d] != 0) return false;
    }
    return true;
  }
};

namespace vol2col_detail {

// ceil(a / b) for b > 0 and any sign of a, without a + b (which overflows for a huge
// stride) or -a (INT64_MIN): C++ division truncates toward zero, which is the ceiling
// for a negative quotient, and one short of it for a positive one with a remainder.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b > 0 ? 1 : 0); }

// Output indices o whose input index o * stride + offset lies in [0, size).
struct Span {
  int64_t begin;
  int64_t end;
};
inline Span valid_outputs(int64_t offset, int64_t stride, int64_t size) {
  return {std::max<int64_t>(0, ceil_div(-offset, stride)), ceil_div(size - offset, stride)};
}

// A stretch of columns with fixed (od, oh): output widths [ow_begin, ow_end), which are
// columns [col, col + ow_end - ow_begin) of the block.
struct Run {
  int64_t od, oh, ow_begin, ow_end, col;
};

inline std::vector<Run> runs_of(const ConvGeometry& g, int64_t p_begin, int64_t p_end) {
  std::vector<Run> runs;
  const int64_t ow_size = g.out[2], oh_size = g.out[1];
  for (int64_t p = p_begin; p < p_end;) {
    const int64_t ow = p % ow_size, oh = (p / ow_size) % oh_size, od = p / (ow_size * oh_size);
    const int64_t length = std::min(ow_size - ow, p_end - p);
    runs.push_back({od, oh, ow, ow + length, p - p_begin});
    p += length;
  }
  return runs;
}

// Where a kernel offset (kd, kh, kw) reads: per-dim offsets and the valid width span.
struct Tap {
  int64_t channel;
  std::array<int64_t, 3> offset;  // input index = output index * stride + offset
  Span width;
};

inline Tap tap_of_row(const ConvGeometry& g, int64_t row) {
  const int64_t kw = row % g.kernel[2], kh = (row / g.kernel[2]) % g.kernel[1];
  const int64_t kd = (row / (g.kernel[2] * g.kernel[1])) % g.kernel[0];
  Tap tap{.channel = row / g.kernel_volume(), .offset = {}, .width = {}};
  const int64_t k[3] = {kd, kh, kw};
  for (int d = 0; d < 3; ++d) tap.offset[d] = k[d] * g.dilation[d] - g.padding[d];
  tap.width = valid_outputs(tap.offset[2], g.stride[2], g.in[2]);
  return tap;
}

// The input row (fixed c, id, ih) a run reads, or null when it lies in the padding.
template <typename T>
T* input_row(T* x, const ConvGeometry& g, const Tap& tap, const Run& run) {
  const int64_t id = run.od * g.stride[0] + tap.offset[0], ih = run.oh * g.stride[1] + tap.offset[1];
  if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) return nullptr;
  return x + ((tap.channel * g.in[0] + id) * g.in[1] + ih) * g.in[2];
}

}  // namespace vol2col_detail

// Which part of the column matrix a call covers: rows [row_begin, row_end) (ordered
// (c, kd, kh, kw)) by output positions [p_begin, p_end).
struct ColumnBlock {
  int64_t row_begin, row_end;
  int64_t p_begin, p_end;
};

// col[(r - row_begin) * ld + (p - p_begin)] = the column matrix's entry (r, p) for the
// block's rows and positions. x points at channel 0 of the group ([channels, in...]
// contiguous).
template <typename T>
void vol2col(const T* x, const ConvGeometry& g, const ColumnBlock& block, T* col, int64_t ld, bool parallel) {
  using namespace vol2col_detail;
  const std::vector<Run> runs = runs_of(g, block.p_begin, block.p_end);
  const int64_t sw = g.stride[2];
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = block.row_begin; r < block.row_end; ++r) {
    const Tap tap = tap_of_row(g, r);
    for (const Run& run : runs) {
      T* dst = col + (r - block.row_begin) * ld + run.col;
      const T* src = input_row(x, g, tap, run);
      const int64_t a = src ? std::clamp(tap.width.begin, run.ow_begin, run.ow_end) : run.ow_end;
      const int64_t b = src ? std::clamp(tap.width.end, a, run.ow_end) : run.ow_end;
      for (int64_t ow = run.ow_begin; ow < a; ++ow) *dst++ = T(0);
      for (int64_t ow = a; ow < b; ++ow) *dst++ = src[ow * sw + tap.offset[2]];
      for (int64_t ow = b; ow < run.ow_end; ++ow) *dst++ = T(0);
    }
  }
}

// x[...] += the block's entries (laid out as vol2col writes them), the transpose of
// vol2col: every (r, p) adds into the input element vol2col would have read it from
// (padding entries are dropped). The block's rows must be whole channels: rows of one
// channel touch only that input channel, so threads split the channels, and each channel's
// rows are added in a fixed order (deterministic).
template <typename T>
void col2vol(const T* col, int64_t ld, const ConvGeometry& g, const ColumnBlock& block, T* x, bool parallel) {
  using namespace vol2col_detail;
  const std::vector<Run> runs = runs_of(g, block.p_begin, block.p_end);
  const int64_t taps = g.kernel_volume(), sw = g.stride[2];
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = block.row_begin / taps; c < block.row_end / taps; ++c) {
    for (int64_t r = c * taps; r < (c + 1) * taps; ++r) {
      const Tap tap = tap_of_row(g, r);
      for (const Run& run : runs) {
        T* dst = input_row(x, g, tap, run);
        if (dst == nullptr) continue;
        const T* src = col + (r - block.row_begin) * ld + run.col;  // src[j]: output width run.ow_begin + j
        const int64_t a = std::clamp(tap.width.begin, run.ow_begin, run.ow_end);
        const int64_t b = std::clamp(tap.width.end, a, run.ow_end);
        for (int64_t ow = a; ow < b; ++ow) dst[ow * sw + tap.offset[2]] += src[ow - run.ow_begin];
      }
    }
  }
}

}  // namespace kiln::cpu
