// The pooling cases both pooling benchmarks run (bench_pool.cpp on the CPU,
// cuda/bench_cuda_pool.cpp on the GPU), so their figures compare like with like:
// max_pool3d 3x3x3 stride 2 padding 1 (a ResNet stem's), avg_pool3d 2x2x2 stride 2, and
// adaptive_avg_pool3d to 1x1x1 (global pooling), on an early stage's [8, 64, 32^3] and the
// last stage's [8, 512, 4^3].
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/pool_geometry.h"

namespace kiln::bench {

enum Pool : int64_t { kMax = 0, kAvg = 1, kAdaptive = 2 };

inline const std::vector<int64_t> kPoolShapes[] = {{8, 64, 32, 32, 32}, {8, 512, 4, 4, 4}};

inline PoolParams pool_params_of(int64_t pool) {
  if (pool == kMax) return {.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}, .dilation = {1, 1, 1}};
  return {.kernel = {2, 2, 2}, .stride = {2, 2, 2}, .padding = {0, 0, 0}, .dilation = {}};
}

inline std::vector<int64_t> pool_output_of(int64_t pool, const std::vector<int64_t>& in) {
  std::vector<int64_t> out = {in[0], in[1]};
  const PoolParams p = pool_params_of(pool);
  for (size_t d = 0; d < 3; ++d) {
    out.push_back(pool == kAdaptive ? 1
                                    : pool_output_size(in[d + 2], p.kernel[d], p.stride[d], p.padding[d], 1, false).value());
  }
  return out;
}

}  // namespace kiln::bench
