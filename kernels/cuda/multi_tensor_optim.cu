// CudaBackend fused optimizer steps: SGD, Adam/AdamW, RMSprop and the step counters, each
// one multi-tensor apply (multi_tensor_apply.cuh) over the parameter list, so a step costs
// a few launches whatever the number of parameters (Note [Multi-tensor kernels] in
// core/backend.h).
//
// Math: Note [Optimizer formulas] in kernels/optimizer_math.h, the per-element functions
// the CPU backend runs too, so both round alike; every buffer updated in place (=). Every
// list shares one dtype; float16/bfloat16 compute in float, float64 in double. Each block
// forms the scalars from the options as it starts (Adam's bias corrections from its
// tensor's step counter, Note [Step counters on the device]), reading lr and the scheduled
// momentum or beta1 from device memory when the step has them there (Note [Scheduled
// options on the device] in core/backend.h): a step a CUDA graph replays uses each
// replay's values, and computes exactly what an eager step with the same values does. A defined
// amp.found_inf that is non-zero makes every block return before writing anything
// (GradScaler's skipped step).
//
// Launch shape: one block of 512 threads per 64K-element chunk (multi_tensor_apply.cuh);
// bandwidth bound (Adam moves 7 values per parameter for ~15 flops), so the kernels aim
// at full-width coalesced vector accesses and nothing else. Current stream, no host sync.
#include <array>
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/multi_tensor_apply.cuh"
#include "kernels/optimizer_math.h"

namespace kiln::cuda {
namespace {

using multi_tensor::Chunk;
using multi_tensor::for_each_lane_group;
using multi_tensor::kIlp;
using multi_tensor::load_lanes;
using multi_tensor::store_lanes;
using multi_tensor::vector_aligned;
namespace math = optimizer_math;

// The amp arguments every step functor carries (nullptr = not given).
struct AmpPointers {
  const float* inv_scale = nullptr;
  const float* found_inf = nullptr;

  // True when GradScaler found an Inf/NaN: the step is skipped.
  __device__ __forceinline__ bool skip() const { return found_inf != nullptr && *found_inf != 0.0f; }
  template <typename V>
  __device__ __forceinline__ V grad_scale() const {
    return inv_scale != nullptr ? static_cast<V>(*inv_scale) : V(1);
  }
};

AmpPointers amp_pointers(const Backend::AmpStepArgs& amp) {
  return {amp.inv_scale.defined() ? static_cast<const float*>(amp.inv_scale.data_ptr()) : nullptr,
          amp.found_inf.defined() ? static_cast<const float*>(amp.found_inf.data_ptr()) : nullptr};
}

// ==== functors: what a block does to its chunk =================================================

// Lists: 0 params, 1 grads, 2 momentum buffers (unused without momentum).
template <typename T>
struct SgdFunctor {
  using V = opmath_t<T>;
  math::SgdHyper hyper;
  const double* scheduled;  // {lr, momentum} on the device, or null
  math::SgdFlags flags;
  bool maximize;
  AmpPointers amp;

  __device__ void operator()(const Chunk<3>& c) const {
    if (amp.skip()) return;
    const math::SgdScalars<V> s = math::sgd_scalars<V>(hyper.with(scheduled));
    T* p = c.list<T>(0);
    const T* g = c.list<T>(1);
    T* buf = flags.momentum ? c.list<T>(2) : nullptr;
    const V unscale = maximize ? -amp.grad_scale<V>() : amp.grad_scale<V>();
    const bool aligned = vector_aligned(p) && vector_aligned(g) && (buf == nullptr || vector_aligned(buf));
    for_each_lane_group(c.n, aligned, [&](auto lanes) {
      V rp[kIlp], rg[kIlp], rb[kIlp] = {};
      load_lanes(rp, p, lanes);
      load_lanes(rg, g, lanes);
      if (flags.momentum && !flags.first_step) load_lanes(rb, buf, lanes);
#pragma unroll
      for (int k = 0; k < kIlp; ++k) math::sgd_update(rp[k], rg[k] * unscale, rb[k], s, flags);
      store_lanes(p, rp, lanes);
      if (flags.momentum) store_lanes(buf, rb, lanes);
    });
  }
};

// Lists: 0 params, 1 grads, 2 exp_avgs, 3 exp_avg_sqs, 4 max_exp_avg_sqs (amsgrad only),
// 5 step counters (one float per tensor).
template <typename T>
struct AdamFunctor {
  using V = opmath_t<T>;
  math::AdamHyper hyper;
  const double* scheduled;  // {lr, beta1} on the device, or null
  math::AdamFlags flags;
  bool maximize;
  AmpPointers amp;

  __device__ void operator()(const Chunk<6>& c) const {
    if (amp.skip()) return;
    T* p = c.list<T>(0);
    const T* g = c.list<T>(1);
    T* m = c.list<T>(2);
    T* v = c.list<T>(3);
    T* vmax = flags.amsgrad ? c.list<T>(4) : nullptr;
    const double step = *static_cast<const float*>(c.ptrs[5]);
    const math::AdamHyper h = hyper.with(scheduled);
    const math::AdamScalars<V> s = math::adam_scalars<V>(h);
    const math::AdamStepSizes<V> t = math::adam_step_sizes<V>(h, step);
    const V unscale = maximize ? -amp.grad_scale<V>() : amp.grad_scale<V>();
    const bool aligned = vector_aligned(p) && vector_aligned(g) && vector_aligned(m) && vector_aligned(v) &&
                         (vmax == nullptr || vector_aligned(vmax));
    for_each_lane_group(c.n, aligned, [&](auto lanes) {
      V rp[kIlp], rg[kIlp], rm[kIlp], rv[kIlp], rmax[kIlp] = {};
      load_lanes(rp, p, lanes);
      load_lanes(rg, g, lanes);
      load_lanes(rm, m, lanes);
      load_lanes(rv, v, lanes);
      if (flags.amsgrad) load_lanes(rmax, vmax, lanes);
#pragma unroll
      for (int k = 0; k < kIlp; ++k) math::adam_update(rp[k], rg[k] * unscale, rm[k], rv[k], rmax[k], s, t, flags);
      store_lanes(p, rp, lanes);
      store_lanes(m, rm, lanes);
      store_lanes(v, rv, lanes);
      if (flags.amsgrad) store_lanes(vmax, rmax, lanes);
    });
  }
};

// Lists: 0 params, 1 grads, 2 square_avgs, 3 momentum buffers (momentum only), 4 grad_avgs
// (centered only).
template <typename T>
struct RmspropFunctor {
  using V = opmath_t<T>;
  math::RmspropHyper hyper;
  const double* scheduled;  // {lr, momentum} on the device, or null
  math::RmspropFlags flags;
  bool maximize;
  AmpPointers amp;

  __device__ void operator()(const Chunk<5>& c) const {
    if (amp.skip()) return;
    const math::RmspropScalars<V> s = math::rmsprop_scalars<V>(hyper.with(scheduled));
    T* p = c.list<T>(0);
    const T* g = c.list<T>(1);
    T* sq = c.list<T>(2);
    T* buf = flags.momentum ? c.list<T>(3) : nullptr;
    T* ga = flags.centered ? c.list<T>(4) : nullptr;
    const V unscale = maximize ? -amp.grad_scale<V>() : amp.grad_scale<V>();
    const bool aligned = vector_aligned(p) && vector_aligned(g) && vector_aligned(sq) &&
                         (buf == nullptr || vector_aligned(buf)) && (ga == nullptr || vector_aligned(ga));
    for_each_lane_group(c.n, aligned, [&](auto lanes) {
      V rp[kIlp], rg[kIlp], rsq[kIlp], rb[kIlp] = {}, rga[kIlp] = {};
      load_lanes(rp, p, lanes);
      load_lanes(rg, g, lanes);
      load_lanes(rsq, sq, lanes);
      if (flags.momentum) load_lanes(rb, buf, lanes);
      if (flags.centered) load_lanes(rga, ga, lanes);
#pragma unroll
      for (int k = 0; k < kIlp; ++k) math::rmsprop_update(rp[k], rg[k] * unscale, rsq[k], rb[k], rga[k], s, flags);
      store_lanes(p, rp, lanes);
      store_lanes(sq, rsq, lanes);
      if (flags.momentum) store_lanes(buf, rb, lanes);
      if (flags.centered) store_lanes(ga, rga, lanes);
    });
  }
};

// List 0: the step counters (Float32 [], one chunk of one element each).
struct IncrementStepsFunctor {
  const float* found_inf;
  __device__ void operator()(const Chunk<1>& c) const {
    if (threadIdx.x != 0 || (found_inf != nullptr && *found_inf != 0.0f)) return;
    *static_cast<float*>(c.ptrs[0]) += 1.0f;
  }
};

// ==== launchers =================================================================================

template <typename F>
void visit_floating(const Tensor& first, const char* op, const F& fn) {
  visit_dtype<kFloatingTypes>(first.dtype(), op, fn);
}

}  // namespace

void CudaBackend::sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                           const std::vector<Tensor>& momentum_buffers, const SgdStepParams& options,
                           const AmpStepArgs& amp) {
  if (params.empty()) return;
  const OnDevice on(params[0].device().index);
  visit_floating(params[0], "sgd_step", [&]<typename T>() {
    const SgdFunctor<T> f{.hyper = math::sgd_hyper(options),
                          .scheduled = math::scheduled_values(options.scheduled),
                          .flags = math::sgd_flags(options),
                          .maximize = options.maximize,
                          .amp = amp_pointers(amp)};
    const std::vector<Tensor> none;
    const std::vector<Tensor>& buffers = f.flags.momentum ? momentum_buffers : none;
    multi_tensor::multi_tensor_apply<3>({&params, &grads, &buffers}, f, on.stream.handle());
  });
}

void CudaBackend::adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                            const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                            const AdamStepParams& options, const AmpStepArgs& amp) {
  if (params.empty()) return;
  KILN_ASSERT(steps.size() == params.size(), "adam_step: ", steps.size(), " step counters for ", params.size(),
              " params");
  const OnDevice on(params[0].device().index);
  visit_floating(params[0], "adam_step", [&]<typename T>() {
    const AdamFunctor<T> f{
        .hyper = math::adam_hyper(options),
        .scheduled = math::scheduled_values(options.scheduled),
        .flags = math::adam_flags(options),
        .maximize = options.maximize,
        .amp = amp_pointers(amp)};
    const std::vector<Tensor> none;
    const std::vector<Tensor>& maxes = options.amsgrad ? max_exp_avg_sqs : none;
    multi_tensor::multi_tensor_apply<6>({&params, &grads, &exp_avgs, &exp_avg_sqs, &maxes, &steps}, f,
                                        on.stream.handle());
  });
}

void CudaBackend::rmsprop_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                               const std::vector<Tensor>& grad_avgs, const RmspropStepParams& options,
                               const AmpStepArgs& amp) {
  if (params.empty()) return;
  const OnDevice on(params[0].device().index);
  visit_floating(params[0], "rmsprop_step", [&]<typename T>() {
    const RmspropFunctor<T> f{.hyper = math::rmsprop_hyper(options),
                              .scheduled = math::scheduled_values(options.scheduled),
                              .flags = math::rmsprop_flags(options),
                              .maximize = options.maximize,
                              .amp = amp_pointers(amp)};
    // A list the flags leave out is passed empty, so no block reads its nullptrs.
    const std::vector<Tensor> none;
    const std::vector<Tensor>& buffers = f.flags.momentum ? momentum_buffers : none;
    const std::vector<Tensor>& averages = f.flags.centered ? grad_avgs : none;
    multi_tensor::multi_tensor_apply<5>({&params, &grads, &square_avgs, &buffers, &averages}, f, on.stream.handle());
  });
}

void CudaBackend::increment_steps(const std::vector<Tensor>& steps, const Tensor& found_inf) {
  if (steps.empty()) return;
  const OnDevice on(steps[0].device().index);
  for (const Tensor& step : steps) {
    KILN_ASSERT(step.dtype() == DType::Float32 && step.numel() == 1, "increment_steps: a step counter is ",
                step.dtype(), " ", step.sizes());
  }
  const IncrementStepsFunctor f{found_inf.defined() ? static_cast<const float*>(found_inf.data_ptr()) : nullptr};
  multi_tensor::multi_tensor_apply<1>({&steps}, f, on.stream.handle());
}

}  // namespace kiln::cuda
