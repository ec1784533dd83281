// CudaBackend fused optimizer steps: SGD, Adam/AdamW, RMSprop and the step counters, each
// one multi-tensor apply (multi_tensor_apply.cuh) over the parameter list, so a step costs
// a few launches whatever the number of parameters (Note [Multi-tensor kernels] in
// core/backend.h).
//
// Math per element, as torch.optim (g = grad * inv_scale, negated when maximize; every
// buffer updated in place, =):
//   SGD      g += wd p;  buf = g on the first step, else momentum buf + (1 - dampening) g;
//            g = nesterov ? g + momentum buf : buf;  p -= lr g
//   Adam     AdamW: p *= 1 - lr wd; Adam: g += wd p.  m = beta1 m + (1 - beta1) g;
//            v = beta2 v + (1 - beta2) g^2;  amsgrad: vmax = max(vmax, v), used for v;
//            p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//   RMSprop  g += wd p;  sq = alpha sq + (1 - alpha) g^2;  centered: ga = ga + (1 - alpha)
//            (g - ga), avg = sqrt(sq - ga^2) + eps, else avg = sqrt(sq) + eps;
//            momentum: buf = momentum buf + g / avg, p -= lr buf; else p -= lr g / avg
// Every list shares one dtype; float16/bfloat16 compute in float, float64 in double. The
// hyperparameters arrive as doubles: combinations of them (1 - beta1, Adam's bias
// corrections from the step counter, 1 - lr wd) are formed in double, then rounded once
// to the compute type. A defined amp.found_inf that is non-zero makes every block return
// before writing anything (GradScaler's skipped step).
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

namespace kiln::cuda {
namespace {

using multi_tensor::Chunk;
using multi_tensor::for_each_lane_group;
using multi_tensor::kIlp;
using multi_tensor::load_lanes;
using multi_tensor::store_lanes;
using multi_tensor::vector_aligned;

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

// max that lets a NaN through (torch.maximum), for amsgrad.
template <typename V>
__device__ __forceinline__ V nan_max(V a, V b) {
  return (b != b || b > a) ? b : a;
}

// ==== functors: what a block does to its chunk =================================================

// Lists: 0 params, 1 grads, 2 momentum buffers (unused without momentum).
template <typename T>
struct SgdFunctor {
  using V = opmath_t<T>;
  V lr, momentum, dampening_complement, weight_decay;  // dampening_complement = 1 - dampening
  bool has_momentum, first_step, nesterov, maximize;
  AmpPointers amp;

  __device__ void operator()(const Chunk<3>& c) const {
    if (amp.skip()) return;
    T* p = c.list<T>(0);
    const T* g = c.list<T>(1);
    T* buf = has_momentum ? c.list<T>(2) : nullptr;
    const V scale = amp.grad_scale<V>();
    const bool aligned = vector_aligned(p) && vector_aligned(g) && (buf == nullptr || vector_aligned(buf));
    for_each_lane_group(c.n, aligned, [&](auto lanes) {
      V rp[kIlp], rg[kIlp], rb[kIlp] = {};
      load_lanes(rp, p, lanes);
      load_lanes(rg, g, lanes);
      if (has_momentum && !first_step) load_lanes(rb, buf, lanes);
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        V d = maximize ? -rg[k] * scale : rg[k] * scale;
        if (weight_decay != V(0)) d += weight_decay * rp[k];
        if (has_momentum) {
          rb[k] = first_step ? d : momentum * rb[k] + dampening_complement * d;
          d = nesterov ? d + momentum * rb[k] : rb[k];
        }
        rp[k] -= lr * d;
      }
      store_lanes(p, rp, lanes);
      if (has_momentum) store_lanes(buf, rb, lanes);
    });
  }
};

// Lists: 0 params, 1 grads, 2 exp_avgs, 3 exp_avg_sqs, 4 max_exp_avg_sqs (amsgrad only),
// 5 step counters (one float per tensor).
template <typename T>
struct AdamFunctor {
  using V = opmath_t<T>;
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay, amsgrad, maximize;
  AmpPointers amp;

  __device__ void operator()(const Chunk<6>& c) const {
    if (amp.skip()) return;
    T* p = c.list<T>(0);
    const T* g = c.list<T>(1);
    T* m = c.list<T>(2);
    T* v = c.list<T>(3);
    T* vmax = amsgrad ? c.list<T>(4) : nullptr;
    const double step = *static_cast<const float*>(c.ptrs[5]);
    const V step_size = static_cast<V>(lr / (1 - std::pow(beta1, step)));
    const V bias_correction2_sqrt = static_cast<V>(std::sqrt(1 - std::pow(beta2, step)));
    const V b1 = static_cast<V>(beta1), b2 = static_cast<V>(beta2);
    const V one_minus_b1 = static_cast<V>(1 - beta1), one_minus_b2 = static_cast<V>(1 - beta2);
    const V e = static_cast<V>(eps), wd = static_cast<V>(weight_decay);
    const V decay = static_cast<V>(1 - lr * weight_decay);  // AdamW's p *= 1 - lr wd
    const bool coupled_decay = weight_decay != 0 && !decoupled_weight_decay;
    const bool decoupled_decay = weight_decay != 0 && decoupled_weight_decay;
    const V scale = amp.grad_scale<V>();
    const bool aligned = vector_aligned(p) && vector_aligned(g) && vector_aligned(m) && vector_aligned(v) &&
                         (vmax == nullptr || vector_aligned(vmax));
    for_each_lane_group(c.n, aligned, [&](auto lanes) {
      V rp[kIlp], rg[kIlp], rm[kIlp], rv[kIlp], rmax[kIlp] = {};
      load_lanes(rp, p, lanes);
      load_lanes(rg, g, lanes);
      load_lanes(rm, m, lanes);
      load_lanes(rv, v, lanes);
      if (amsgrad) load_lanes(rmax, vmax, lanes);
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        V grad = maximize ? -rg[k] * scale : rg[k] * scale;
        if (decoupled_decay) rp[k] *= decay;
        if (coupled_decay) grad += wd * rp[k];
        rm[k] = b1 * rm[k] + one_minus_b1 * grad;
        rv[k] = b2 * rv[k] + one_minus_b2 * grad * grad;
        V second_moment = rv[k];
        if (amsgrad) second_moment = rmax[k] = nan_max(rmax[k], rv[k]);
        const V denom = std::sqrt(second_moment) / bias_correction2_sqrt + e;
        rp[k] -= step_size * rm[k] / denom;
      }
      store_lanes(p, rp, lanes);
      store_lanes(m, rm, lanes);
      store_lanes(v, rv, lanes);
      if (amsgrad) store_lanes(vmax, rmax, lanes);
    });
  }
};

// Lists: 0 params, 1 grads, 2 square_avgs, 3 momentum buffers (momentum only), 4 grad_avgs
// (centered only).
template <typename T>
struct RmspropFunctor {
  using V = opmath_t<T>;
  V lr, alpha, one_minus_alpha, eps, weight_decay, momentum;
  bool centered, has_momentum, maximize;
  AmpPointers amp;

  __device__ void operator()(const Chunk<5>& c) const {
    if (amp.skip()) return;
    T* p = c.list<T>(0);
    const T* g = c.list<T>(1);
    T* sq = c.list<T>(2);
    T* buf = has_momentum ? c.list<T>(3) : nullptr;
    T* ga = centered ? c.list<T>(4) : nullptr;
    const V scale = amp.grad_scale<V>();
    const bool aligned = vector_aligned(p) && vector_aligned(g) && vector_aligned(sq) &&
                         (buf == nullptr || vector_aligned(buf)) && (ga == nullptr || vector_aligned(ga));
    for_each_lane_group(c.n, aligned, [&](auto lanes) {
      V rp[kIlp], rg[kIlp], rsq[kIlp], rb[kIlp] = {}, rga[kIlp] = {};
      load_lanes(rp, p, lanes);
      load_lanes(rg, g, lanes);
      load_lanes(rsq, sq, lanes);
      if (has_momentum) load_lanes(rb, buf, lanes);
      if (centered) load_lanes(rga, ga, lanes);
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        V grad = maximize ? -rg[k] * scale : rg[k] * scale;
        if (weight_decay != V(0)) grad += weight_decay * rp[k];
        rsq[k] = alpha * rsq[k] + one_minus_alpha * grad * grad;
        V avg;
        if (centered) {
          rga[k] += one_minus_alpha * (grad - rga[k]);
          avg = std::sqrt(rsq[k] - rga[k] * rga[k]) + eps;
        } else {
          avg = std::sqrt(rsq[k]) + eps;
        }
        if (has_momentum) {
          rb[k] = momentum * rb[k] + grad / avg;
          rp[k] -= lr * rb[k];
        } else {
          rp[k] -= lr * (grad / avg);
        }
      }
      store_lanes(p, rp, lanes);
      store_lanes(sq, rsq, lanes);
      if (has_momentum) store_lanes(buf, rb, lanes);
      if (centered) store_lanes(ga, rga, lanes);
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
    using V = opmath_t<T>;
    const SgdFunctor<T> f{.lr = static_cast<V>(options.lr),
                          .momentum = static_cast<V>(options.momentum),
                          .dampening_complement = static_cast<V>(1 - options.dampening),
                          .weight_decay = static_cast<V>(options.weight_decay),
                          .has_momentum = options.momentum != 0,
                          .first_step = options.first_step,
                          .nesterov = options.nesterov,
                          .maximize = options.maximize,
                          .amp = amp_pointers(amp)};
    const std::vector<Tensor> none;
    const std::vector<Tensor>& buffers = options.momentum != 0 ? momentum_buffers : none;
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
    const AdamFunctor<T> f{.lr = options.lr,
                           .beta1 = options.beta1,
                           .beta2 = options.beta2,
                           .eps = options.eps,
                           .weight_decay = options.weight_decay,
                           .decoupled_weight_decay = options.decoupled_weight_decay,
                           .amsgrad = options.amsgrad,
                           .maximize = options.maximize,
                           .amp = amp_pointers(amp)};
    const std::vector<Tensor> none;
    const std::vector<Tensor>& maxes = options.amsgrad ? max_exp_avg_sqs : none;
    multi_tensor::multi_tensor_apply<6>({&params, &grads, &exp_avgs, &exp_avg_sqs, &maxes, &steps}, f, on.stream.handle());
  });
}

void CudaBackend::rmsprop_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                               const std::vector<Tensor>& grad_avgs, const RmspropStepParams& options,
                               const AmpStepArgs& amp) {
  if (params.empty()) return;
  const OnDevice on(params[0].device().index);
  visit_floating(params[0], "rmsprop_step", [&]<typename T>() {
    using V = opmath_t<T>;
    const RmspropFunctor<T> f{.lr = static_cast<V>(options.lr),
                              .alpha = static_cast<V>(options.alpha),
                              .one_minus_alpha = static_cast<V>(1 - options.alpha),
                              .eps = static_cast<V>(options.eps),
                              .weight_decay = static_cast<V>(options.weight_decay),
                              .momentum = static_cast<V>(options.momentum),
                              .centered = options.centered,
                              .has_momentum = options.momentum > 0,
                              .maximize = options.maximize,
                              .amp = amp_pointers(amp)};
    // momentum > 0, as the op layer (which then requires the buffers) and the CPU backend
    // decide it: a negative momentum has no buffers, and must not read list 3's nullptr.
    const std::vector<Tensor> none;
    const std::vector<Tensor>& buffers = options.momentum > 0 ? momentum_buffers : none;
    const std::vector<Tensor>& averages = options.centered ? grad_avgs : none;
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
