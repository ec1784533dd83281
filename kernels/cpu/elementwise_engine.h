// The CPU elementwise engine: one loop for every unary, binary and ternary op.
//
// Operands arrive with one shape (broadcast already done by the op layer: stride 0 where
// an input is broadcast) and arbitrary strides. The engine
//   1. drops size-1 dims and coalesces neighbouring dims that are contiguous with each
//      other in every operand (a contiguous tensor becomes one dim of numel elements);
//   2. splits the element range over OpenMP threads (ranges of at least kGrain elements);
//   3. walks each thread's range as runs along the innermost dim, calling a typed loop
//      per run: the contiguous fast path (every stride == element size, a plain indexed
//      loop the compiler vectorizes) or the strided path (byte strides).
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

namespace kiln::cpu {

inline constexpr int kMaxDims = 16;
inline constexpr int kMaxOperands = 4;
inline constexpr int64_t kGrain = 32768;

// Operands after coalescing; operand 0 is the output. Innermost dim last.
struct StridedLoop {
  int ndim = 0;
  int noperands = 0;
  std::array<int64_t, kMaxDims> sizes{};
  std::array<std::array<int64_t, kMaxDims>, kMaxOperands> byte_strides{};
  std::array<char*, kMaxOperands> data{};
  int64_t numel = 1;
};

// Builds the coalesced loop over `operands` (all of the same shape; [0] is the output).
StridedLoop make_strided_loop(std::initializer_list<const Tensor*> operands);

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
  parallel_for(loop.numel, kGrain, [&](int64_t begin, int64_t end) {
    for_each_run(loop, begin, end, [&](char** ptrs, const int64_t* strides, int64_t n) {
      detail::run_typed<Out, In...>(ptrs, strides, n, f, std::index_sequence_for<In...>{});
    });
  });
}

}  // namespace kiln::cpu
