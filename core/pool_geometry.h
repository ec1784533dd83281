// Pooling geometry shared by the op layer (output shapes, core/ops/pool.cpp) and both
// backends' kernels (window bounds and divisors, kernels/{cpu,cuda}/pool.*).
//
// Note [Pool geometry]: the kernels see every pooling as 3-d. An input [N, C, s...] with
// 1 or 2 spatial dims gets leading spatial dims of size 1 (kernel 1, stride 1, padding 0,
// dilation 1), which changes neither the values nor the flat spatial indices that max
// pooling records ((d H + h) W + w with D = 1 is h W + w). The N and C dims are one dim
// of `planes` = N C independent volumes, since no window crosses planes.
//
// Note [Average pooling divisor]: as PyTorch's avg_pool, along each dim the window of
// output o starts at a = o stride - padding and is first clipped to the padded input,
// b = min(a + kernel, size + padding); the padded count is (b - a). It is then clipped to
// the input, [max(a, 0), min(b, size)), and only those elements are summed. The divisor
// is divisor_override when given, else the product of the padded counts
// (count_include_pad) or of the clipped counts. So with ceil_mode a window that sticks out
// past the right padding counts only its part inside the padded input, never the
// overhang. An empty clipped window gives 0 (the ceil_mode rule makes that impossible).
//
// Note [Adaptive windows]: output i of o along a dim of size s averages the input window
// [floor(i s / o), ceil((i + 1) s / o)); neighbouring windows overlap when s % o != 0.
// Input x lies in the windows of i in [floor(x o / s), ceil((x + 1) o / s)).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln {

struct PoolParams;

// Output size along one dim: floor_or_ceil((size + 2 padding - dilation (kernel - 1) - 1)
// / stride) + 1, where with ceil_mode the last window must start inside the input or its
// left padding (otherwise it is dropped). May be < 1; the op layer rejects that. nullopt
// when the padded size, the window's reach and the stride add up to more than
// kPoolIndexLimit (or overflow), which no real input comes near: below it, every index
// the kernels compute (sums of two such numbers) fits int64.
inline constexpr int64_t kPoolIndexLimit = int64_t{1} << 61;
std::optional<int64_t> pool_output_size(int64_t size, int64_t kernel, int64_t stride, int64_t padding,
                                        int64_t dilation, bool ceil_mode);

// Everything a pooling kernel needs, as plain numbers (passed by value to CUDA kernels):
// Note [Pool geometry]'s 3-d view of input [planes, in...] -> output [planes, out...].
struct PoolGeometry {
  int64_t planes = 1;
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t pad[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // > 0: divide by this

  KILN_HOST_DEVICE int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  KILN_HOST_DEVICE int64_t out_volume() const { return out[0] * out[1] * out[2]; }
};

// The geometry of `input` [N, C, s...] pooled into `output` [N, C, o...] (the same rank,
// 3 to 5) with `params` (one entry per spatial dim; empty for adaptive pooling).
PoolGeometry pool_geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& output,
                           const PoolParams& params);
PoolGeometry adaptive_pool_geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& output);

// One dim of an average-pooling window (Note [Average pooling divisor]): the summed range
// [begin, end) and the padded count.
struct PoolRange {
  int64_t begin;
  int64_t end;
  int64_t padded;
};

KILN_HOST_DEVICE inline PoolRange avg_pool_range(const PoolGeometry& g, int dim, int64_t o) {
  const int64_t a = o * g.stride[dim] - g.pad[dim];
  const int64_t limit = g.in[dim] + g.pad[dim];
  const int64_t b = a + g.kernel[dim] < limit ? a + g.kernel[dim] : limit;
  return {a > 0 ? a : 0, b < g.in[dim] ? b : g.in[dim], b - a};
}

// Note [Adaptive windows] along one dim (padded is the window's length).
KILN_HOST_DEVICE inline PoolRange adaptive_pool_range(const PoolGeometry& g, int dim, int64_t i) {
  const int64_t s = g.in[dim], o = g.out[dim];
  const int64_t begin = i * s / o;
  const int64_t end = ((i + 1) * s + o - 1) / o;
  return {begin, end, end - begin};
}

// The taps j in [first, last) of a max-pooling window starting at `start` (dilation
// apart) that fall inside the input [0, size).
KILN_HOST_DEVICE inline void valid_taps(int64_t start, int64_t kernel, int64_t dilation, int64_t size,
                                        int64_t* first, int64_t* last) {
  const int64_t lo = start < 0 ? (-start + dilation - 1) / dilation : 0;
  const int64_t hi = size - start <= 0 ? 0 : (size - start + dilation - 1) / dilation;
  *first = lo;
  *last = hi < kernel ? hi : kernel;
}

// The divisor of an average window from its three ranges (Note [Average pooling divisor]).
KILN_HOST_DEVICE inline int64_t avg_pool_divisor(const PoolGeometry& g, const PoolRange (&r)[3]) {
  if (g.divisor_override > 0) return g.divisor_override;
  if (g.count_include_pad) return r[0].padded * r[1].padded * r[2].padded;
  return (r[0].end - r[0].begin) * (r[1].end - r[1].begin) * (r[2].end - r[2].begin);
}

// The first output whose max-pooling window (with dilation) can hold input x along `dim`,
// and one past the last: o stride - pad <= x <= o stride - pad + dilation (kernel - 1).
// For average pooling pass dilation 1 (the geometry has it).
KILN_HOST_DEVICE inline void outputs_covering(const PoolGeometry& g, int dim, int64_t x, int64_t* first,
                                              int64_t* last) {
  const int64_t reach = x + g.pad[dim] - g.dilation[dim] * (g.kernel[dim] - 1);  // may be < 0
  const int64_t lo = reach <= 0 ? 0 : (reach + g.stride[dim] - 1) / g.stride[dim];
  const int64_t hi = (x + g.pad[dim]) / g.stride[dim] + 1;
  *first = lo;
  *last = hi < g.out[dim] ? hi : g.out[dim];
}

// Note [Adaptive windows]: the outputs whose window may hold input x along `dim`.
KILN_HOST_DEVICE inline void adaptive_outputs_covering(const PoolGeometry& g, int dim, int64_t x, int64_t* first,
                                                       int64_t* last) {
  const int64_t s = g.in[dim], o = g.out[dim];
  *first = x * o / s;
  const int64_t hi = ((x + 1) * o + s - 1) / s;
  *last = hi < o ? hi : o;
}

}  // namespace kiln
