// The last step of a split per-channel reduction, shared by the batch-norm kernels of both
// layouts (batch_norm.cu, batch_norm_channels_last.cu): blocks that each reduced a part of
// a channel parked their states in partials[c * splits + split]; one thread per channel
// merges them in split order (deterministic) and writes the result through the reducer.
#pragma once

#include <cstdint>

namespace kiln::cuda {

// R: State combine(State, State); void write(State, int64_t c).
template <typename R>
__global__ void channel_finalize(R r, const typename R::State* partials, int64_t channels, int64_t splits) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  typename R::State state = partials[c * splits];
  for (int64_t s = 1; s < splits; ++s) state = r.combine(state, partials[c * splits + s]);
  r.write(state, c);
}

inline constexpr int kFinalizeThreads = 128;

}  // namespace kiln::cuda
