// The CPU elementwise engine: one loop for every unary, binary and ternary op.
//
// Operands arrive with one shape (broadcast already done by the op layer: stride 0 where
// an input is broadcast) and arbitrary strides. The engine
//   1. coalesces them into a StridedLoop (kernels/strided_loop.h, shared with CUDA);
//   2. splits the element range over OpenMP threads (ranges of at least kGrain elements);
//   3. walks each thread's range as runs along the innermost dim, calling a typed loop
//      per run: the contiguous fast path (every stride == element size, a plain indexed
//      loop the compiler vectorizes) or the strided path (byte strides).
// When an operand is transposed (it runs faster along the second-innermost dim than the
// innermost one), walking whole rows would touch a new cache line for each of its
// elements; the engine then walks kTile x kTile tiles of the two innermost dims instead,
// so each line of the transposed operand is reused across the tile's rows.
// Values are loaded as the op's opmath type (float for Half/BFloat16, Note [Opmath]),
// the functor computes, and the result is rounded on store.
#pragma once

#include <omp.h>

#include <array>
#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/strided_loop.h"

namespace kiln::cpu {

inline constexpr int64_t kGrain = 32768;

// Runs `fn(begin, end)` over [0, n) split into chunks of at least `grain`, in parallel
// when there is enough work.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= grain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t max_chunks = (n + grain - 1) / grain;
#pragma omp parallel
  {
    const int64_t threads = std::min<int64_t>(omp_get_num_threads(), max_chunks);
    const int64_t tid = omp_get_thread_num();
    if (tid < threads) {
      const int64_t chunk = (n + threads - 1) / threads;
      const int64_t begin = tid * chunk;
      const int64_t end = std::min(n, begin + chunk);
      if (begin < end) fn(begin, end);
    }
  }
}

// Calls run(ptrs, inner_strides, count) for each innermost run inside [begin, end).
template <typename Run>
void for_each_run(const StridedLoop& loop, int64_t begin, int64_t end, const Run& run) {
  const int nd = loop.ndim;
  const int no = loop.noperands;
  const int64_t inner_size = nd > 0 ? loop.sizes[nd - 1] : 1;
  std::array<int64_t, kMaxDims> index{};
  int64_t rest = begin / inner_size;
  for (int d = nd - 2; d >= 0; --d) {
    index[d] = rest % loop.sizes[d];
    rest /= loop.sizes[d];
  }
  int64_t inner_start = begin % inner_size;
  std::array<int64_t, kMaxOperands> inner_strides{};
  for (int k = 0; k < no; ++k) inner_strides[k] = nd > 0 ? loop.byte_strides[k][nd - 1] : 0;
  int64_t done = begin;
  while (done < end) {
    std::array<char*, kMaxOperands> ptrs{};
    for (int k = 0; k < no; ++k) {
      int64_t offset = inner_start * inner_strides[k];
      for (int d = 0; d < nd - 1; ++d) offset += index[d] * loop.byte_strides[k][d];
      ptrs[k] = loop.data[k] + offset;
    }
    const int64_t count = std::min(inner_size - inner_start, end - done);
    run(ptrs.data(), inner_strides.data(), count);
    done += count;
    inner_start = 0;
    for (int d = nd - 2; d >= 0; --d) {
      if (++index[d] < loop.sizes[d]) break;
      index[d] = 0;
    }
  }
}

inline constexpr int64_t kTile = 32;

// Whether some operand moves faster along dim nd-2 than along the innermost dim nd-1.
inline bool needs_tiling(const StridedLoop& loop) {
  const int nd = loop.ndim;
  if (nd < 2 || loop.sizes[nd - 1] < kTile || loop.sizes[nd - 2] < kTile) return false;
  for (int k = 0; k < loop.noperands; ++k) {
    const int64_t inner = loop.byte_strides[k][nd - 1], outer = loop.byte_strides[k][nd - 2];
    if (outer != 0 && outer < inner) return true;
  }
  return false;
}

// Tiled walk for transposed layouts. A unit is (index over the dims outside the two
// innermost, band of kTile rows of dim nd-2); for units [unit_begin, unit_end) it calls
// run(ptrs, inner_strides, count) on row pieces of at most kTile elements, tile by tile.
template <typename Run>
void for_each_tile(const StridedLoop& loop, int64_t unit_begin, int64_t unit_end, const Run& run) {
  const int nd = loop.ndim;
  const int no = loop.noperands;
  const int64_t rows = loop.sizes[nd - 2], cols = loop.sizes[nd - 1];
  const int64_t bands = (rows + kTile - 1) / kTile;
  std::array<int64_t, kMaxOperands> inner{};
  for (int k = 0; k < no; ++k) inner[k] = loop.byte_strides[k][nd - 1];
  for (int64_t unit = unit_begin; unit < unit_end; ++unit) {
    const int64_t band = unit % bands;
    int64_t outer = unit / bands;
    std::array<char*, kMaxOperands> base{};
    for (int k = 0; k < no; ++k) base[k] = loop.data[k];
    for (int d = nd - 3; d >= 0; --d) {
      const int64_t i = outer % loop.sizes[d];
      outer /= loop.sizes[d];
      for (int k = 0; k < no; ++k) base[k] += i * loop.byte_strides[k][d];
    }
    const int64_t row_end = std::min(rows, (band + 1) * kTile);
    for (int64_t col0 = 0; col0 < cols; col0 += kTile) {
      const int64_t count = std::min(kTile, cols - col0);
      for (int64_t row = band * kTile; row < row_end; ++row) {
        std::array<char*, kMaxOperands> ptrs{};
        for (int k = 0; k < no; ++k) ptrs[k] = base[k] + row * loop.byte_strides[k][nd - 2] + col0 * inner[k];
        run(ptrs.data(), inner.data(), count);
      }
    }
  }
}

template <typename T>
inline opmath_t<T> load(const char* p) {
  return static_cast<opmath_t<T>>(*reinterpret_cast<const T*>(p));
}

template <typename T, typename V>
inline void store(char* p, V v) {
  if constexpr (std::is_same_v<T, bool>) {
    *reinterpret_cast<T*>(p) = static_cast<bool>(v);
  } else {
    *reinterpret_cast<T*>(p) = static_cast<T>(v);
  }
}

namespace detail {

template <typename Out, typename... In, typename F, size_t... I>
void run_typed(char** ptrs, const int64_t* strides, int64_t n, const F& f, std::index_sequence<I...>) {
  const bool contiguous = strides[0] == sizeof(Out) && ((strides[I + 1] == sizeof(In)) && ...);
  if (contiguous) {
    Out* out = reinterpret_cast<Out*>(ptrs[0]);
    std::tuple<const In*...> in{reinterpret_cast<const In*>(ptrs[I + 1])...};
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<Out>(f(static_cast<opmath_t<In>>(std::get<I>(in)[i])...));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    store<Out>(ptrs[0] + i * strides[0], f(load<In>(ptrs[I + 1] + i * strides[I + 1])...));
  }
}

}  // namespace detail

// out[i] = f(in0[i], in1[i], ...) over the loop; Out/In are storage types, f takes and
// returns opmath values.
template <typename Out, typename... In, typename F>
void elementwise_kernel(const StridedLoop& loop, const F& f) {
  if (loop.numel == 0) return;
  const auto run = [&](char** ptrs, const int64_t* strides, int64_t n) {
    detail::run_typed<Out, In...>(ptrs, strides, n, f, std::index_sequence_for<In...>{});
  };
  if (needs_tiling(loop)) {
    const int64_t rows = loop.sizes[loop.ndim - 2], cols = loop.sizes[loop.ndim - 1];
    const int64_t units = loop.numel / (rows * cols) * ((rows + kTile - 1) / kTile);
    const int64_t grain = std::max<int64_t>(1, kGrain / (kTile * cols));
    parallel_for(units, grain, [&](int64_t begin, int64_t end) { for_each_tile(loop, begin, end, run); });
    return;
  }
  parallel_for(loop.numel, kGrain, [&](int64_t begin, int64_t end) { for_each_run(loop, begin, end, run); });
}

}  // namespace kiln::cpu
