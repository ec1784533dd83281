// Warp shuffles of any trivially copyable state (a Welford triple, an online-softmax
// pair, an arg-extremum with its index), word by word: __shfl_*_sync moves 32-bit words,
// so the state is copied into words, each word shuffled, and the words copied back; and
// warp_allreduce, the warp-wide reduction built on them that the kernels share.
// Every lane of the warp must call them (full mask).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace kiln::cuda {

// The state of lane (lane + delta) within groups of `width` lanes (__shfl_down_sync).
template <typename S>
__device__ __forceinline__ S shuffle_down(const S& value, unsigned delta, int width = 32) {
  constexpr int kWords = (sizeof(S) + 3) / 4;
  uint32_t words[kWords] = {};
  memcpy(words, &value, sizeof(S));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = __shfl_down_sync(0xffffffffu, words[w], delta, width);
  S result;
  memcpy(&result, words, sizeof(S));
  return result;
}

// The state of lane (lane ^ mask) (__shfl_xor_sync): butterfly reductions that leave
// the result in every lane.
template <typename S>
__device__ __forceinline__ S shuffle_xor(const S& value, int mask) {
  constexpr int kWords = (sizeof(S) + 3) / 4;
  uint32_t words[kWords] = {};
  memcpy(words, &value, sizeof(S));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = __shfl_xor_sync(0xffffffffu, words[w], mask);
  S result;
  memcpy(&result, words, sizeof(S));
  return result;
}

// Every lane of the warp gets the combination of all 32 lanes' values (a butterfly of
// shuffle_xor): sums, maxima, online-softmax pairs. The order of the combinations is the
// same on every run, so the result is deterministic.
template <typename S, typename F>
__device__ __forceinline__ S warp_allreduce(S value, const F& combine) {
#pragma unroll
  for (int mask = 16; mask > 0; mask /= 2) value = combine(value, shuffle_xor(value, mask));
  return value;
}

}  // namespace kiln::cuda
