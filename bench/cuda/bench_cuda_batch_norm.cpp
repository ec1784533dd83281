// CUDA batch-norm pieces (kernels/cuda/batch_norm.cu) on 3D-CNN shapes [N, C, D, H, W]:
// [8, 64, 32^3] (few channels, big volumes: the split-channel grid), [8, 256, 8^3] and
// [32, 512, 4^3] (many channels, small volumes), in f32, f16, bf16.
//
// Roofline: a few flops per value (Welford: ~10 per 16-byte vector value plus one
// division per vector), far under an H200's ~14 flops per DRAM byte, so bandwidth bound.
// Compulsory bytes per iteration (element size b, numel m; [C] tensors negligible):
//   stats             reads x once                       b m
//   apply             reads x, writes y                  2 b m
//   backward reduce   reads x and dy                     2 b m
//   backward input    reads x and dy, writes dx          3 b m
//   backward (both)                                      5 b m
// each against the same run's device copy peak (bench_cuda_util.h); L2 flushed before
// every iteration. Target: of_peak >= 0.8 on [8, 64, 32^3].
#include "bench/cuda/bench_cuda_util.h"
#include "core/backend.h"
#include "core/ops.h"

namespace kiln::bench {
namespace {

const DType kDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16};

// args: N, C, spatial edge (D = H = W), dtype index.
struct Operands {
  DType dtype;
  Tensor x, dy, out, mean, var, invstd, weight, bias, sum_dy, sum_dy_xmu;
  explicit Operands(const benchmark::State& state) : dtype(kDTypes[state.range(3)]) {
    const int64_t e = state.range(2), c = state.range(1);
    const TensorOptions big{.dtype = dtype, .device = Device::cuda()};
    const TensorOptions small{.dtype = DType::Float32, .device = Device::cuda()};
    x = rand({state.range(0), c, e, e, e}, big);
    dy = rand(x.sizes(), big);
    out = empty(x.sizes(), big);
    mean = zeros({c}, small);
    var = ones({c}, small);
    invstd = ones({c}, small);
    weight = ones({c}, small);
    bias = zeros({c}, small);
    sum_dy = zeros({c}, small);
    sum_dy_xmu = zeros({c}, small);
  }
  double bytes(int tensors) const {
    return static_cast<double>(tensors) * static_cast<double>(x.numel() * itemsize(dtype));
  }
  int64_t count() const { return x.numel() / x.sizes()[1]; }
  BatchNormCoefficients norm() const { return {.mean = mean, .invstd = invstd, .weight = weight, .bias = bias}; }
  Backend& kernels() const { return backend(x.device()); }
};

void BM_CudaBatchNormStats(benchmark::State& state) {
  const Operands o(state);
  run_cuda_benchmark(state, o.bytes(1), "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { o.kernels().batch_norm_stats(o.x, o.mean, o.var); });
  state.SetLabel(std::string(dtype_name(o.dtype)));
}

void BM_CudaBatchNormApply(benchmark::State& state) {
  const Operands o(state);
  run_cuda_benchmark(state, o.bytes(2), "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { o.kernels().batch_norm_apply(o.x, o.norm(), o.out); });
  state.SetLabel(std::string(dtype_name(o.dtype)));
}

void BM_CudaBatchNormBackwardReduce(benchmark::State& state) {
  const Operands o(state);
  run_cuda_benchmark(state, o.bytes(2), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    o.kernels().batch_norm_backward_reduce(o.dy, o.x, o.norm(), o.sum_dy, o.sum_dy_xmu, Tensor());
  });
  state.SetLabel(std::string(dtype_name(o.dtype)));
}

void BM_CudaBatchNormBackwardInput(benchmark::State& state) {
  const Operands o(state);
  run_cuda_benchmark(state, o.bytes(3), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    o.kernels().batch_norm_backward_input(o.dy, o.x, o.norm(), o.sum_dy, o.sum_dy_xmu, o.count(), o.out);
  });
  state.SetLabel(std::string(dtype_name(o.dtype)));
}

// The whole training backward: reduce then input (what the op's node runs).
void BM_CudaBatchNormBackward(benchmark::State& state) {
  const Operands o(state);
  run_cuda_benchmark(state, o.bytes(5), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    o.kernels().batch_norm_backward_reduce(o.dy, o.x, o.norm(), o.sum_dy, o.sum_dy_xmu, Tensor());
    o.kernels().batch_norm_backward_input(o.dy, o.x, o.norm(), o.sum_dy, o.sum_dy_xmu, o.count(), o.out);
  });
  state.SetLabel(std::string(dtype_name(o.dtype)));
}

// A residual block's tail through the ops, training forward and backward:
// batch_norm_add_relu (arg 0 = 1) against relu(batch_norm(x) + r) (0), NCDHW or
// channels-last (arg 1), f32 or bf16 (arg 2: dtype index), on [8, 64, 32^3]. Bytes: the
// fused op's compulsory 11 activations (Note [Batch norm, add and ReLU]) for both, so rates
// compare as times; the composition moves 16 (roofline gain 1.45x).
void BM_CudaBatchNormAddReluOp(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  const MemoryFormat format = state.range(1) != 0 ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
  const DType dtype = kDTypes[state.range(2)];
  const TensorOptions big{.dtype = dtype, .device = Device::cuda()};
  const TensorOptions small{.dtype = DType::Float32, .device = Device::cuda()};
  const Tensor x = rand({8, 64, 32, 32, 32}, big).contiguous(format).requires_grad_(true);
  const Tensor residual = sub(rand(x.sizes(), big), 0.5).contiguous(format).requires_grad_(true);
  const Tensor weight = ones({64}, small).requires_grad_(true),
               bias = zeros({64}, small).requires_grad_(true);
  const Tensor running_mean = zeros({64}, small), running_var = ones({64}, small);
  const Tensor upstream = rand(x.sizes(), big).contiguous(format);
  const double bytes = 11.0 * static_cast<double>(x.numel() * itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    const Tensor y = fused
                         ? batch_norm_add_relu(x, residual, running_mean, running_var, weight, bias, true)
                         : relu(add(batch_norm(x, running_mean, running_var, weight, bias, true), residual));
    y.backward(upstream);
    for (const Tensor* t : {&x, &residual, &weight, &bias}) t->set_grad(Tensor());
  });
  state.SetLabel(std::string(fused ? "batch_norm_add_relu " : "relu(batch_norm + r) ") +
                 std::string(dtype_name(dtype)) + (state.range(1) != 0 ? " channels-last" : ""));
}

// Args (N, C, edge, dtype index): [8, 64, 32^3] in every dtype, the two wide shapes in f32.
void batch_norm_shapes(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{8}, {64}, {32}, {0, 1, 2}})->Args({8, 256, 8, 0})->Args({32, 512, 4, 0})->UseManualTime();
}

}  // namespace

void register_cuda_batch_norm_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaBatchNormStats", BM_CudaBatchNormStats)->Apply(batch_norm_shapes);
  benchmark::RegisterBenchmark("BM_CudaBatchNormApply", BM_CudaBatchNormApply)->Apply(batch_norm_shapes);
  benchmark::RegisterBenchmark("BM_CudaBatchNormBackwardReduce", BM_CudaBatchNormBackwardReduce)
      ->Apply(batch_norm_shapes);
  benchmark::RegisterBenchmark("BM_CudaBatchNormBackwardInput", BM_CudaBatchNormBackwardInput)
      ->Apply(batch_norm_shapes);
  benchmark::RegisterBenchmark("BM_CudaBatchNormBackward", BM_CudaBatchNormBackward)
      ->Apply(batch_norm_shapes);
  benchmark::RegisterBenchmark("BM_CudaBatchNormAddReluOp", BM_CudaBatchNormAddReluOp)
      ->ArgsProduct({{0, 1}, {0, 1}, {0, 2}})
      ->UseManualTime();
}

}  // namespace kiln::bench
