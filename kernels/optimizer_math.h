// The per-element math of the fused optimizer steps (SGD, Adam/AdamW, RMSprop), written
// once for both backends: kernels/cpu/multi_tensor.cpp runs these functions in its chunked
// OpenMP loops and kernels/cuda/multi_tensor_optim.cu in its multi-tensor apply, so a
// step rounds the same way on the CPU and on the GPU (up to the device's sqrt and pow).
//
// Note [Optimizer formulas]: PyTorch's torch.optim single-tensor algorithms, element by
// element, in the compute type M (float for float16/bfloat16/float32, double for float64):
//   g = grad * inv_scale, negated when maximize   (negating the product is exact)
//   SGD      g += wd p;  buf = g on the first step, else momentum buf + (1 - dampening) g;
//            g = nesterov ? g + momentum buf : buf (with momentum);  p -= lr g
//   Adam     AdamW: p *= 1 - lr wd;  Adam: g += wd p
//            m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g g
//            amsgrad: v_max = max(v_max, v) (NaN wins), used for v below
//            denom = sqrt(v) / sqrt(1 - beta2^step) + eps
//            p += -(lr / (1 - beta1^step)) (m / denom)           (PyTorch's addcdiv_)
//   RMSprop  g += wd p;  sq = alpha sq + (1 - alpha) g g
//            centered: ga = lerp(ga, g, 1 - alpha), avg = sqrt(sq - ga ga) + eps;
//            else avg = sqrt(sq) + eps
//            momentum > 0: buf = momentum buf + g / avg, p -= lr buf;  else p -= lr (g / avg)
// The hyper-parameters arrive as doubles (a *Hyper struct, which lr and the scheduled
// momentum or beta1 may come into from device memory: Note [Scheduled options on the
// device] in core/backend.h, *_hyper below); their combinations (1 - beta1, 1 - lr wd,
// Adam's bias corrections from the step counter) are formed in double and rounded once to
// M (the *_scalars functions), on the host by the CPU and in each block by CUDA.
//
// The options that change a loop's shape (weight decay on or off, momentum, amsgrad,
// centered, ...) come as a Flags object with bool members: the CPU passes a Static*Flags
// type whose members are compile-time constants, so its loop has no branch and GCC
// vectorises it; CUDA passes the run-time *Flags (a branch uniform across the block).
#pragma once

#include <cmath>

#include "core/backend.h"
#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln::optimizer_math {

#define KM KILN_HOST_DEVICE inline

// PyTorch's lerp: self + w (end - self), written from the end when |w| >= 0.5 so that
// w = 1 gives end exactly.
template <typename M>
KM M lerp(M self, M end, M weight) {
  return std::abs(weight) < M(0.5) ? self + weight * (end - self) : end - (end - self) * (M(1) - weight);
}

// torch.maximum: a NaN in either wins.
template <typename M>
KM M nan_maximum(M a, M b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

// ---- SGD ------------------------------------------------------------------------------------

struct SgdFlags {
  bool weight_decay, momentum, first_step, nesterov;
};
template <bool kWeightDecay, bool kMomentum, bool kFirstStep, bool kNesterov>
struct StaticSgdFlags {
  static constexpr bool weight_decay = kWeightDecay, momentum = kMomentum, first_step = kFirstStep,
                        nesterov = kNesterov;
};

template <typename M>
struct SgdScalars {
  M lr, momentum, keep, weight_decay;  // keep = 1 - dampening
};

struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  // {lr, momentum} from device memory (Note [Scheduled options on the device]), if given.
  KM SgdHyper with(const double* scheduled) const {
    return scheduled == nullptr ? *this : SgdHyper{scheduled[0], scheduled[1], dampening, weight_decay};
  }
};

inline SgdHyper sgd_hyper(const Backend::SgdStepParams& o) {
  return {.lr = o.lr, .momentum = o.momentum, .dampening = o.dampening, .weight_decay = o.weight_decay};
}

inline SgdFlags sgd_flags(const Backend::SgdStepParams& o) {
  const bool momentum = o.momentum != 0;
  return {.weight_decay = o.weight_decay != 0, .momentum = momentum, .first_step = momentum && o.first_step,
          .nesterov = momentum && o.nesterov};
}

template <typename M>
KM SgdScalars<M> sgd_scalars(const SgdHyper& h) {
  return {.lr = static_cast<M>(h.lr), .momentum = static_cast<M>(h.momentum),
          .keep = static_cast<M>(1.0 - h.dampening), .weight_decay = static_cast<M>(h.weight_decay)};
}

// One element: `grad` already unscaled (and negated for maximize); `buf` is read only when
// momentum is on and this is not the first step.
template <typename M, typename Flags>
KM void sgd_update(M& param, M grad, M& buf, const SgdScalars<M>& s, const Flags& f) {
  if (f.weight_decay) grad += s.weight_decay * param;
  if (f.momentum) {
    buf = f.first_step ? grad : s.momentum * buf + s.keep * grad;
    grad = f.nesterov ? grad + s.momentum * buf : buf;
  }
  param = param - s.lr * grad;
}

// ---- Adam / AdamW ---------------------------------------------------------------------------

struct AdamFlags {
  bool coupled_weight_decay, decoupled_weight_decay, amsgrad;
};
template <bool kCoupledWeightDecay, bool kDecoupledWeightDecay, bool kAmsgrad>
struct StaticAdamFlags {
  static constexpr bool coupled_weight_decay = kCoupledWeightDecay, decoupled_weight_decay = kDecoupledWeightDecay,
                        amsgrad = kAmsgrad;
};

template <typename M>
struct AdamScalars {
  M weight_decay, decay, beta2, one_minus_beta1, one_minus_beta2, eps;  // decay = 1 - lr wd (AdamW)
};

// The two numbers that depend on a tensor's step counter.
template <typename M>
struct AdamStepSizes {
  M step_size;              // lr / (1 - beta1^step)
  M bias_correction2_sqrt;  // sqrt(1 - beta2^step)
};

struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  // {lr, beta1} from device memory (Note [Scheduled options on the device]), if given.
  KM AdamHyper with(const double* scheduled) const {
    return scheduled == nullptr ? *this : AdamHyper{scheduled[0], scheduled[1], beta2, eps, weight_decay};
  }
};

inline AdamHyper adam_hyper(const Backend::AdamStepParams& o) {
  return {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

inline AdamFlags adam_flags(const Backend::AdamStepParams& o) {
  const bool decay = o.weight_decay != 0;
  return {.coupled_weight_decay = decay && !o.decoupled_weight_decay,
          .decoupled_weight_decay = decay && o.decoupled_weight_decay, .amsgrad = o.amsgrad};
}

template <typename M>
KM AdamScalars<M> adam_scalars(const AdamHyper& h) {
  return {.weight_decay = static_cast<M>(h.weight_decay), .decay = static_cast<M>(1.0 - h.lr * h.weight_decay),
          .beta2 = static_cast<M>(h.beta2), .one_minus_beta1 = static_cast<M>(1.0 - h.beta1),
          .one_minus_beta2 = static_cast<M>(1.0 - h.beta2), .eps = static_cast<M>(h.eps)};
}

template <typename M>
KM AdamStepSizes<M> adam_step_sizes(const AdamHyper& h, double step) {
  return {.step_size = static_cast<M>(h.lr / (1.0 - std::pow(h.beta1, step))),
          .bias_correction2_sqrt = static_cast<M>(std::sqrt(1.0 - std::pow(h.beta2, step)))};
}

// One element; `max_exp_avg_sq` is read and written only with amsgrad.
template <typename M, typename Flags>
KM void adam_update(M& param, M grad, M& exp_avg, M& exp_avg_sq, M& max_exp_avg_sq, const AdamScalars<M>& s,
                    const AdamStepSizes<M>& t, const Flags& f) {
  if (f.decoupled_weight_decay) param = param * s.decay;
  if (f.coupled_weight_decay) grad += s.weight_decay * param;
  exp_avg = lerp(exp_avg, grad, s.one_minus_beta1);
  exp_avg_sq = s.beta2 * exp_avg_sq + s.one_minus_beta2 * grad * grad;
  M second_moment = exp_avg_sq;
  if (f.amsgrad) second_moment = max_exp_avg_sq = nan_maximum(max_exp_avg_sq, exp_avg_sq);
  const M denom = std::sqrt(second_moment) / t.bias_correction2_sqrt + s.eps;
  param = param + (-t.step_size) * (exp_avg / denom);
}

// ---- RMSprop --------------------------------------------------------------------------------

struct RmspropFlags {
  bool weight_decay, centered, momentum;
};
template <bool kWeightDecay, bool kCentered, bool kMomentum>
struct StaticRmspropFlags {
  static constexpr bool weight_decay = kWeightDecay, centered = kCentered, momentum = kMomentum;
};

template <typename M>
struct RmspropScalars {
  M lr, alpha, one_minus_alpha, eps, weight_decay, momentum;
};

// momentum > 0 decides the momentum path, as the op layer (which then requires the
// buffers) decides it: a negative momentum has no buffers.
inline RmspropFlags rmsprop_flags(const Backend::RmspropStepParams& o) {
  return {.weight_decay = o.weight_decay != 0, .centered = o.centered, .momentum = o.momentum > 0};
}

struct RmspropHyper {
  double lr, alpha, eps, weight_decay, momentum;
  // {lr, momentum} from device memory (Note [Scheduled options on the device]), if given.
  KM RmspropHyper with(const double* scheduled) const {
    return scheduled == nullptr ? *this : RmspropHyper{scheduled[0], alpha, eps, weight_decay, scheduled[1]};
  }
};

inline RmspropHyper rmsprop_hyper(const Backend::RmspropStepParams& o) {
  return {.lr = o.lr, .alpha = o.alpha, .eps = o.eps, .weight_decay = o.weight_decay, .momentum = o.momentum};
}

template <typename M>
KM RmspropScalars<M> rmsprop_scalars(const RmspropHyper& h) {
  return {.lr = static_cast<M>(h.lr), .alpha = static_cast<M>(h.alpha),
          .one_minus_alpha = static_cast<M>(1.0 - h.alpha), .eps = static_cast<M>(h.eps),
          .weight_decay = static_cast<M>(h.weight_decay), .momentum = static_cast<M>(h.momentum)};
}

// The device (or host) address of a step's scheduled options, or null (Note [Scheduled
// options on the device]).
inline const double* scheduled_values(const Tensor& scheduled) {
  return scheduled.defined() ? static_cast<const double*>(scheduled.data_ptr()) : nullptr;
}

// RMSprop in three pieces, so that the CPU loop can store the running averages as soon as
// they are computed (Note [RMSprop stores its averages early] in kernels/cpu/multi_tensor.cpp);
// rmsprop_update runs them in order for one element. `buf` is used only with momentum,
// `grad_avg` only when centered.

// The gradient the update uses: g + wd p with weight decay.
template <typename M, typename Flags>
KM M rmsprop_grad(M param, M grad, const RmspropScalars<M>& s, const Flags& f) {
  return f.weight_decay ? grad + s.weight_decay * param : grad;
}

// The running averages: sq = alpha sq + (1 - alpha) g g; centered: ga = lerp(ga, g, 1 - alpha).
template <typename M, typename Flags>
KM void rmsprop_averages(M grad, M& square_avg, M& grad_avg, const RmspropScalars<M>& s, const Flags& f) {
  square_avg = s.alpha * square_avg + s.one_minus_alpha * grad * grad;
  if (f.centered) grad_avg = lerp(grad_avg, grad, s.one_minus_alpha);
}

// The step from the updated averages: avg = sqrt(sq - ga ga, or sq) + eps, then p -= lr g / avg
// (with momentum through buf).
template <typename M, typename Flags>
KM void rmsprop_apply(M& param, M grad, M square_avg, M grad_avg, M& buf, const RmspropScalars<M>& s,
                      const Flags& f) {
  const M variance = f.centered ? square_avg - grad_avg * grad_avg : square_avg;
  const M avg = std::sqrt(variance) + s.eps;
  if (f.momentum) {
    buf = s.momentum * buf + grad / avg;
    param = param - s.lr * buf;
  } else {
    param = param - s.lr * (grad / avg);
  }
}

// One element, the three pieces in order (what the CUDA functor runs).
template <typename M, typename Flags>
KM void rmsprop_update(M& param, M grad, M& square_avg, M& buf, M& grad_avg, const RmspropScalars<M>& s,
                       const Flags& f) {
  grad = rmsprop_grad(param, grad, s, f);
  rmsprop_averages(grad, square_avg, grad_avg, s, f);
  rmsprop_apply(param, grad, square_avg, grad_avg, buf, s, f);
}

#undef KM

}  // namespace kiln::optimizer_math
