// CPU pooling (kernels/cpu/pool.cpp) on 3D-CNN shapes, forward and backward, float32:
// max_pool3d 3x3x3 stride 2 padding 1 (a ResNet stem's), avg_pool3d 2x2x2 (stride 2) and
// adaptive_avg_pool3d to 1x1x1 (global pooling), on [8, 64, 32, 32, 32] (an early stage)
// and [8, 512, 4, 4, 4] (the last stage), in NCDHW and in channels-last (NDHWC: the
// kernels of kernels/cpu/pool_channels_last.cpp; third arg 1).
//
// Roofline: a pooling touches each input element a handful of times (27 taps for every
// output of the 3x3x3 stride-2 max pool, ~3.4 per input element) with one compare or add
// each: well under one flop per byte moved, so memory-bound. The compulsory bytes are
// counted: forward reads the input and writes the output (+ the Int64 indices for max);
// backward reads grad_out (+ the indices) and writes grad_in. The rate is compared with
// the memcpy peak measured in the same run (bench_util.h).
#include "bench/bench_util.h"
#include "core/backend.h"
#include "core/ops.h"
#include "bench/pool_cases.h"

namespace kiln::bench {
namespace {

const char* name_of(int64_t pool) { return pool == kMax ? "max 3x3x3 s2 p1" : pool == kAvg ? "avg 2x2x2" : "adaptive 1"; }

MemoryFormat layout_of(const benchmark::State& state) {
  return state.range(2) != 0 ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
}

void label(benchmark::State& state, int64_t pool) {
  state.SetLabel(std::string(name_of(pool)) + (state.range(2) != 0 ? ", channels-last" : ""));
}

// args: pool kind, shape index, channels-last (0 or 1).
void BM_PoolForward(benchmark::State& state) {
  const int64_t pool = state.range(0);
  const std::vector<int64_t>& in = kPoolShapes[state.range(1)];
  const Tensor x = rand(in).contiguous(layout_of(state));
  const Tensor y = empty(pool_output_of(pool, in), {}, layout_of(state));
  const Tensor idx = empty(y.sizes(), {.dtype = DType::Int64}, layout_of(state));
  Backend& cpu = backend(Device::cpu());
  const double bytes = 4.0 * static_cast<double>(x.numel() + y.numel()) + (pool == kMax ? 8.0 * y.numel() : 0.0);
  run_bandwidth_benchmark(state, bytes, [&] {
    if (pool == kMax) cpu.max_pool_forward(x, pool_params_of(pool), y, idx);
    if (pool == kAvg) cpu.avg_pool_forward(x, pool_params_of(pool), y);
    if (pool == kAdaptive) cpu.adaptive_avg_pool_forward(x, y);
  });
  label(state, pool);
}

void BM_PoolBackward(benchmark::State& state) {
  const int64_t pool = state.range(0);
  const std::vector<int64_t>& in = kPoolShapes[state.range(1)];
  const Tensor gx = empty(in, {}, layout_of(state));
  const Tensor gy = rand(pool_output_of(pool, in)).contiguous(layout_of(state));
  const Tensor idx = empty(gy.sizes(), {.dtype = DType::Int64}, layout_of(state));
  Backend& cpu = backend(Device::cpu());
  if (pool == kMax)
    cpu.max_pool_forward(rand(in).contiguous(layout_of(state)), pool_params_of(pool), empty_like(gy), idx);
  const double bytes = 4.0 * static_cast<double>(gx.numel() + gy.numel()) + (pool == kMax ? 8.0 * gy.numel() : 0.0);
  run_bandwidth_benchmark(state, bytes, [&] {
    if (pool == kMax) cpu.max_pool_backward(gy, idx, pool_params_of(pool), gx);
    if (pool == kAvg) cpu.avg_pool_backward(gy, pool_params_of(pool), gx);
    if (pool == kAdaptive) cpu.adaptive_avg_pool_backward(gy, gx);
  });
  label(state, pool);
}

BENCHMARK(BM_PoolForward)
    ->ArgsProduct({{kMax, kAvg, kAdaptive}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PoolBackward)
    ->ArgsProduct({{kMax, kAvg, kAdaptive}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
