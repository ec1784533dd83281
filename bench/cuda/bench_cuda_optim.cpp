// CUDA fused multi-tensor kernels (kernels/cuda/multi_tensor_*.cu) on the parameters of a
// 3D ResNet-50 (bench/resnet50_params.h: 161 tensors, ~47 M values): Adam and SGD with
// momentum as one fused call for the whole list against one call per parameter (what a
// plain loop over parameters costs: ~160 launches and their host-side validation), the
// unscale + non-finite check of GradScaler, and the gradient norm of clip_grad_norm_.
// Calls go through the public ops (core/ops/multi_tensor.h), as an optimizer makes them.
//
// Roofline: a few flops per value moved (Adam ~15 per 28 bytes), far under an H200's
// ~14 flops per DRAM byte, so every kernel here is bandwidth bound. Compulsory bytes per
// parameter, element size b (4 in float32):
//   Adam               reads p, g, m, v; writes p, m, v          7 b   (28 bytes in f32)
//   SGD with momentum  reads p, g, buf; writes p, buf            5 b
//   unscale + check    reads g, writes g                         2 b
//   norm               reads g                                   1 b
// reported as bytes/s and as of_peak, the fraction of the device copy peak measured in
// the same run (bench_cuda_util.h), with params/s beside. L2 flushed before every
// iteration (47 M params x 28 bytes = 1.3 GB would not fit anyway). Target for the fused
// calls: of_peak >= 0.8; the per-parameter loop shows the launch and validation overhead
// the fusion saves (the small batch-norm tensors cost as much as the big convs).
#include "bench/cuda/bench_cuda_util.h"
#include "bench/resnet50_params.h"
#include "core/ops/multi_tensor.h"

namespace kiln::bench {
namespace {

const DType kDTypes[] = {DType::Float32, DType::BFloat16};

// One tensor per 3D ResNet-50 parameter, random values of `dtype` (positive when asked,
// for second moments) on cuda:0.
std::vector<Tensor> resnet_list(DType dtype, bool positive = false) {
  std::vector<Tensor> list;
  for (const std::vector<int64_t>& shape : resnet3d50_param_shapes()) {
    const Tensor t = rand(shape, {.dtype = dtype, .device = Device::cuda()});
    list.push_back(positive ? t : t - 0.5);
  }
  return list;
}

int64_t total_numel(const std::vector<Tensor>& list) {
  int64_t n = 0;
  for (const Tensor& t : list) n += t.numel();
  return n;
}

// Reports params/s next to the bytes/s that run_cuda_benchmark measured.
void report_params(benchmark::State& state, int64_t params, double bytes_per_iteration, DType dtype) {
  if (state.counters.count("bytes/s") != 0) {
    state.counters["params/s"] = state.counters["bytes/s"].value * static_cast<double>(params) / bytes_per_iteration;
  }
  state.SetLabel(std::string(dtype_name(dtype)) + " resnet3d50 " + std::to_string(params) + " params");
}

// Adam's state for the whole list: params, grads, exp_avgs, exp_avg_sqs, step counters.
struct AdamState {
  std::vector<Tensor> p, g, m, v, steps;
  explicit AdamState(DType dtype) : p(resnet_list(dtype)), g(resnet_list(dtype)), m(resnet_list(dtype)),
                                    v(resnet_list(dtype, true)) {
    for (size_t i = 0; i < p.size(); ++i) steps.push_back(full({}, 10.0, {.dtype = DType::Float32, .device = Device::cuda()}));
  }
  double bytes() const { return 7.0 * static_cast<double>(total_numel(p) * itemsize(p[0].dtype())); }
};

const AdamStepParams kAdam{.lr = 1e-3, .weight_decay = 1e-2, .decoupled_weight_decay = true};

// args: dtype index
void BM_CudaAdamFused(benchmark::State& state) {
  const AdamState s(kDTypes[state.range(0)]);
  run_cuda_benchmark(state, s.bytes(), "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { adam_step_(s.p, s.g, s.m, s.v, {}, s.steps, kAdam); });
  report_params(state, total_numel(s.p), s.bytes(), s.p[0].dtype());
}

void BM_CudaAdamPerParameter(benchmark::State& state) {
  const AdamState s(kDTypes[state.range(0)]);
  run_cuda_benchmark(state, s.bytes(), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    for (size_t i = 0; i < s.p.size(); ++i) adam_step_({s.p[i]}, {s.g[i]}, {s.m[i]}, {s.v[i]}, {}, {s.steps[i]}, kAdam);
  });
  report_params(state, total_numel(s.p), s.bytes(), s.p[0].dtype());
}

// SGD with momentum (after the first step): params, grads, momentum buffers.
struct SgdState {
  std::vector<Tensor> p, g, buf;
  explicit SgdState(DType dtype) : p(resnet_list(dtype)), g(resnet_list(dtype)), buf(resnet_list(dtype)) {}
  double bytes() const { return 5.0 * static_cast<double>(total_numel(p) * itemsize(p[0].dtype())); }
};

const SgdStepParams kSgd{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true};

void BM_CudaSgdMomentumFused(benchmark::State& state) {
  const SgdState s(kDTypes[state.range(0)]);
  run_cuda_benchmark(state, s.bytes(), "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { sgd_step_(s.p, s.g, s.buf, kSgd); });
  report_params(state, total_numel(s.p), s.bytes(), s.p[0].dtype());
}

void BM_CudaSgdMomentumPerParameter(benchmark::State& state) {
  const SgdState s(kDTypes[state.range(0)]);
  run_cuda_benchmark(state, s.bytes(), "bytes/s", cuda_copy_peak_bytes_per_second(), [&] {
    for (size_t i = 0; i < s.p.size(); ++i) sgd_step_({s.p[i]}, {s.g[i]}, {s.buf[i]}, kSgd);
  });
  report_params(state, total_numel(s.p), s.bytes(), s.p[0].dtype());
}

// GradScaler's unscale_: grads *= inv_scale in place, found_inf set on Inf/NaN.
void BM_CudaUnscaleAndCheck(benchmark::State& state) {
  const DType dtype = kDTypes[state.range(0)];
  const std::vector<Tensor> g = resnet_list(dtype);
  const Tensor inv_scale = full({1}, 1.0, {.dtype = DType::Float32, .device = Device::cuda()});
  const Tensor found_inf = zeros({1}, {.dtype = DType::Float32, .device = Device::cuda()});
  const double bytes = 2.0 * static_cast<double>(total_numel(g) * itemsize(dtype));
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { multi_tensor_scale_(g, g, inv_scale, found_inf); });
  report_params(state, total_numel(g), bytes, dtype);
}

// clip_grad_norm_'s total norm (p = 2) of every gradient.
void BM_CudaGradNorm(benchmark::State& state) {
  const DType dtype = kDTypes[state.range(0)];
  const std::vector<Tensor> g = resnet_list(dtype);
  const double bytes = static_cast<double>(total_numel(g) * itemsize(dtype));
  Tensor norm;
  run_cuda_benchmark(state, bytes, "bytes/s", cuda_copy_peak_bytes_per_second(),
                     [&] { norm = multi_tensor_norm(g, 2.0); });
  report_params(state, total_numel(g), bytes, dtype);
}

}  // namespace

void register_cuda_optim_benchmarks() {
  benchmark::RegisterBenchmark("BM_CudaAdamFused", BM_CudaAdamFused)->DenseRange(0, 1)->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaAdamPerParameter", BM_CudaAdamPerParameter)->Arg(0)->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaSgdMomentumFused", BM_CudaSgdMomentumFused)
      ->DenseRange(0, 1)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaSgdMomentumPerParameter", BM_CudaSgdMomentumPerParameter)
      ->Arg(0)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaUnscaleAndCheck", BM_CudaUnscaleAndCheck)
      ->DenseRange(0, 1)
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_CudaGradNorm", BM_CudaGradNorm)->DenseRange(0, 1)->UseManualTime();
}

}  // namespace kiln::bench
