// The per-window pieces of CpuBackend's pooling kernels, shared by the channels-first
// (pool.cpp) and channels-last (pool_channels_last.cpp) kernels: the rule of a window's
// running max and its index, and each dim's windows computed once per call (max pooling's
// taps, average pooling's ranges, divisor factors and covering outputs; Notes [Pool
// geometry], [Average pooling divisor] and [Adaptive windows] in core/pool_geometry.h).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/pool_geometry.h"

namespace kiln::cpu {

// Max pooling's rule for a candidate (value, index) against the running maximum (best,
// where): it takes the place when it is a tap (index >= 0) and there is no maximum yet
// (where < 0), or it is larger, or it is the first NaN. Ties keep the earlier tap; a NaN,
// once in, stays. Branch-free (selects, not jumps): on real data whether a tap beats the
// best so far is a coin toss, a mispredicted branch per tap cost more than the whole
// comparison, and loops of selects vectorise.
template <typename V>
inline bool takes_place(V value, int64_t index, V best, int64_t where) {
  return (index >= 0) & ((where < 0) | (value > best) | ((value != value) & (best == best)));
}

// Offers the candidate (value, index) to the running maximum (best, where) with bit
// masks, not a branch: scalar code (a short row, a vector loop's remainder) compiled
// `take ? v : b` as a jump, mispredicted on real data.
template <typename V>
inline void offer(V& best, int64_t& where, V value, int64_t index) {
  const int64_t mask = -static_cast<int64_t>(takes_place(value, index, best, where));  // all ones: taken
  where = (index & mask) | (where & ~mask);
  using Bits = std::conditional_t<sizeof(V) == 4, uint32_t, uint64_t>;
  const auto value_mask = static_cast<Bits>(mask);
  best = std::bit_cast<V>(static_cast<Bits>((std::bit_cast<Bits>(value) & value_mask) |
                                            (std::bit_cast<Bits>(best) & ~value_mask)));
}

// Offers n candidates (values[i], indices[i]) to n running maxima (best[i], where[i]),
// one to one: the update of a row of outputs by one tap each, vectorised over the row.
template <typename V>
inline void offer_row(V* best, int64_t* where, const V* values, const int64_t* indices, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {  // selects, which GCC vectorises (offer's masks it did not, as well)
    const V v = values[i], b = best[i];
    const int64_t k = indices[i], w = where[i];
    const bool take = takes_place(v, k, b, w);
    best[i] = take ? v : b;
    where[i] = take ? k : w;
  }
}

// The taps of every output position along dim k: start and [first, last) (valid_taps).
struct AxisTaps {
  std::vector<int64_t> start, first, last;
  int64_t dilation;
  AxisTaps(const PoolGeometry& g, int k) : dilation(g.dilation[k]) {
    for (int64_t o = 0; o < g.out[k]; ++o) {
      int64_t f = 0, l = 0;
      valid_taps(o * g.stride[k] - g.pad[k], g.kernel[k], g.dilation[k], g.in[k], &f, &l);
      start.push_back(o * g.stride[k] - g.pad[k]);
      first.push_back(f);
      last.push_back(l);
    }
  }
  // Input position of output o's tap t.
  int64_t at(int64_t o, int64_t t) const { return start[o] + t * dilation; }
};

// Average pooling along dim k, computed once per call instead of once per output.
struct AvgAxis {
  std::vector<PoolRange> window;     // per output: the summed range and the padded count
  std::vector<int64_t> count;        // per output: its factor of the divisor
  std::vector<int64_t> first, last;  // per input position: the outputs [first, last) whose window holds it

  AvgAxis(const PoolGeometry& g, int k, bool adaptive)
      : first(static_cast<size_t>(g.in[k]), 0), last(static_cast<size_t>(g.in[k]), 0) {
    for (int64_t o = 0; o < g.out[k]; ++o) {
      const PoolRange r = adaptive ? adaptive_pool_range(g, k, o) : avg_pool_range(g, k, o);
      window.push_back(r);
      count.push_back(g.count_include_pad ? r.padded : r.end - r.begin);
      for (int64_t x = r.begin; x < r.end; ++x) {
        if (last[x] == 0) first[x] = o;  // the first window holding x
        last[x] = o + 1;
      }
    }
  }
};

// Output (od, oh, ow)'s divisor, 0 for an empty window (whose value is 0).
inline int64_t avg_divisor(const PoolGeometry& g, const AvgAxis (&axes)[3], int64_t od, int64_t oh,
                           int64_t ow) {
  const PoolRange& rd = axes[0].window[od];
  const PoolRange& rh = axes[1].window[oh];
  const PoolRange& rw = axes[2].window[ow];
  if (rd.end <= rd.begin || rh.end <= rh.begin || rw.end <= rw.begin) return 0;
  if (g.divisor_override > 0) return g.divisor_override;
  return axes[0].count[od] * axes[1].count[oh] * axes[2].count[ow];
}

}  // namespace kiln::cpu
