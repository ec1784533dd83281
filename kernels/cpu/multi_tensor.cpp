// CpuBackend fused optimizer steps: SGD, Adam/AdamW and RMSprop over a whole parameter
// list in one parallel loop (kernels/cpu/multi_tensor_apply.h), plus the step counters.
//
// Math: PyTorch's single-tensor paths (torch/optim/sgd.py, adam.py, rmsprop.py), one
// element at a time, every update in place (=). With g the gradient as read, times
// amp.inv_scale, negated first when maximize, and g += wd p (non-decoupled decay):
//   SGD      buf = g on the first step, else momentum buf + (1 - dampening) g;
//            g = nesterov ? g + momentum buf : buf (when momentum != 0);  p -= lr g
//   Adam     (AdamW: p *= 1 - lr wd instead of g += wd p)
//            m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
//            amsgrad: v_max = max(v_max, v), used for v below
//            denom = sqrt(v) / sqrt(1 - beta2^step) + eps
//            p += -(lr / (1 - beta1^step)) m / denom
//   RMSprop  sq = alpha sq + (1 - alpha) g^2
//            centered: ga = lerp(ga, g, 1 - alpha), avg = sqrt(sq - ga^2) + eps;
//            else avg = sqrt(sq) + eps
//            momentum > 0: buf = momentum buf + g / avg, p -= lr buf;  else p -= lr g / avg
// Layout: every tensor contiguous, params, grads and states of one floating dtype (Note
// [Multi-tensor kernels]); float16/bfloat16 load into float, compute, and round on store
// (Note [Opmath]); the per-tensor scalars (Adam's bias corrections) are computed once in
// double on the host. amp.found_inf non-zero: nothing is written at all.
//
// Loop shape: each optimizer has a range function (one tensor's elements [begin, end))
// whose options that change the loop's shape (weight decay, momentum, amsgrad, ...) are
// template flags, picked once per call by with_flags. The loop then has no branches and
// GCC vectorises it (with Note [No math errno], kernels/cpu/CMakeLists.txt); maximize
// rides on the unscale factor's sign (negating a product is exact: -(g s) = g (-s)).
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/multi_tensor_apply.h"

namespace kiln::cpu {
namespace {

// The data pointers of a list; [i] of an absent (empty) state list is null.
template <typename T>
class ListPointers {
 public:
  explicit ListPointers(const std::vector<Tensor>& tensors) {
    for (const Tensor& t : tensors) ptrs_.push_back(t.data_ptr<T>());
  }
  T* operator[](int64_t i) const { return ptrs_.empty() ? nullptr : ptrs_[static_cast<size_t>(i)]; }

 private:
  std::vector<T*> ptrs_;
};

// Calls fn.template operator()<b...>() with the runtime bools as template arguments.
template <bool... kDone, typename Fn, typename... Rest>
void with_flags(const Fn& fn, bool first, Rest... rest) {
  if constexpr (sizeof...(Rest) == 0) {
    if (first) fn.template operator()<kDone..., true>();
    else fn.template operator()<kDone..., false>();
  } else {
    if (first) with_flags<kDone..., true>(fn, rest...);
    else with_flags<kDone..., false>(fn, rest...);
  }
}

// PyTorch's lerp: self + w (end - self), written from the end when w >= 0.5 so that
// w = 1 gives end exactly.
template <typename M>
M lerp(M self, M end, M weight) {
  return std::abs(weight) < M(0.5) ? self + weight * (end - self) : end - (end - self) * (M(1) - weight);
}

// torch.maximum: NaN wins.
template <typename M>
M maximum(M a, M b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return a > b ? a : b;
}

// ---- SGD ----------------------------------------------------------------------------------

template <typename M>
struct SgdScalars {
  M unscale, lr, wd, momentum, keep;  // keep = 1 - dampening
};

template <typename T, bool kCoupledDecay, bool kMomentum, bool kFirstStep, bool kNesterov>
void sgd_range(T* __restrict p, const T* __restrict g, T* __restrict buf_ptr, int64_t begin, int64_t end,
               const SgdScalars<opmath_t<T>>& s) {
  using M = opmath_t<T>;
  for (int64_t j = begin; j < end; ++j) {
    const M value = static_cast<M>(p[j]);
    M grad = static_cast<M>(g[j]) * s.unscale;
    if constexpr (kCoupledDecay) grad += s.wd * value;
    if constexpr (kMomentum) {
      M buf = grad;
      if constexpr (!kFirstStep) buf = s.momentum * static_cast<M>(buf_ptr[j]) + s.keep * grad;
      buf_ptr[j] = static_cast<T>(buf);
      grad = kNesterov ? grad + s.momentum * buf : buf;
    }
    p[j] = static_cast<T>(value - s.lr * grad);
  }
}

template <typename T>
void sgd_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const Backend::SgdStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const ListPointers<T> p(params), g(grads), b(momentum_buffers);
  const SgdScalars<M> s{.unscale = static_cast<M>(o.maximize ? -inv_scale : inv_scale),
                        .lr = static_cast<M>(o.lr),
                        .wd = static_cast<M>(o.weight_decay),
                        .momentum = static_cast<M>(o.momentum),
                        .keep = static_cast<M>(1.0 - o.dampening)};
  const bool momentum = o.momentum != 0;
  with_flags([&]<bool kCoupledDecay, bool kMomentum, bool kFirstStep, bool kNesterov>() {
    multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
      sgd_range<T, kCoupledDecay, kMomentum, kFirstStep, kNesterov>(p[c.tensor], g[c.tensor], b[c.tensor], c.begin,
                                                                    c.end, s);
    });
  }, o.weight_decay != 0, momentum, momentum && o.first_step, momentum && o.nesterov);
}

// ---- Adam / AdamW -------------------------------------------------------------------------

template <typename M>
struct AdamScalars {
  M unscale, wd, decay, beta2, one_minus_beta1, one_minus_beta2, eps;  // decay = 1 unless AdamW
};

template <typename T, bool kCoupledDecay, bool kAmsgrad>
void adam_range(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict v_max,
                int64_t begin, int64_t end, const AdamScalars<opmath_t<T>>& s, opmath_t<T> step_size,
                opmath_t<T> bias_correction2_sqrt) {
  using M = opmath_t<T>;
  for (int64_t j = begin; j < end; ++j) {
    const M value = static_cast<M>(p[j]) * s.decay;
    M grad = static_cast<M>(g[j]) * s.unscale;
    if constexpr (kCoupledDecay) grad += s.wd * static_cast<M>(p[j]);
    const M exp_avg = lerp(static_cast<M>(m[j]), grad, s.one_minus_beta1);
    const M exp_avg_sq = s.beta2 * static_cast<M>(v[j]) + s.one_minus_beta2 * grad * grad;
    m[j] = static_cast<T>(exp_avg);
    v[j] = static_cast<T>(exp_avg_sq);
    M second_moment = exp_avg_sq;
    if constexpr (kAmsgrad) {
      second_moment = maximum(static_cast<M>(v_max[j]), exp_avg_sq);
      v_max[j] = static_cast<T>(second_moment);
    }
    const M denom = std::sqrt(second_moment) / bias_correction2_sqrt + s.eps;
    p[j] = static_cast<T>(value + (-step_size) * (exp_avg / denom));
  }
}

template <typename T>
void adam_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                const Backend::AdamStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const ListPointers<T> p(params), g(grads), m(exp_avgs), v(exp_avg_sqs), v_max(max_exp_avg_sqs);
  // Per tensor: step_size = lr / (1 - beta1^step), sqrt(1 - beta2^step), in double.
  std::vector<M> step_size(params.size()), bias_correction2_sqrt(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const double step = steps[i].data_ptr<float>()[0];
    step_size[i] = static_cast<M>(o.lr / (1.0 - std::pow(o.beta1, step)));
    bias_correction2_sqrt[i] = static_cast<M>(std::sqrt(1.0 - std::pow(o.beta2, step)));
  }
  const bool decoupled = o.decoupled_weight_decay && o.weight_decay != 0;
  const AdamScalars<M> s{.unscale = static_cast<M>(o.maximize ? -inv_scale : inv_scale),
                         .wd = static_cast<M>(o.weight_decay),
                         .decay = static_cast<M>(decoupled ? 1.0 - o.lr * o.weight_decay : 1.0),
                         .beta2 = static_cast<M>(o.beta2),
                         .one_minus_beta1 = static_cast<M>(1.0 - o.beta1),
                         .one_minus_beta2 = static_cast<M>(1.0 - o.beta2),
                         .eps = static_cast<M>(o.eps)};
  with_flags([&]<bool kCoupledDecay, bool kAmsgrad>() {
    multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
      const size_t i = static_cast<size_t>(c.tensor);
      adam_range<T, kCoupledDecay, kAmsgrad>(p[c.tensor], g[c.tensor], m[c.tensor], v[c.tensor], v_max[c.tensor],
                                             c.begin, c.end, s, step_size[i], bias_correction2_sqrt[i]);
    });
  }, o.weight_decay != 0 && !o.decoupled_weight_decay, o.amsgrad);
}

// ---- RMSprop ------------------------------------------------------------------------------

template <typename M>
struct RmspropScalars {
  M unscale, lr, wd, alpha, one_minus_alpha, eps, momentum;
};

template <typename T, bool kCoupledDecay, bool kCentered, bool kMomentum>
void rmsprop_range(T* __restrict p, const T* __restrict g, T* __restrict sq, T* __restrict buf_ptr,
                   T* __restrict ga, int64_t begin, int64_t end, const RmspropScalars<opmath_t<T>>& s) {
  using M = opmath_t<T>;
  for (int64_t j = begin; j < end; ++j) {
    const M value = static_cast<M>(p[j]);
    M grad = static_cast<M>(g[j]) * s.unscale;
    if constexpr (kCoupledDecay) grad += s.wd * value;
    const M square_avg = s.alpha * static_cast<M>(sq[j]) + s.one_minus_alpha * grad * grad;
    sq[j] = static_cast<T>(square_avg);
    M variance = square_avg;
    if constexpr (kCentered) {
      const M grad_avg = lerp(static_cast<M>(ga[j]), grad, s.one_minus_alpha);
      ga[j] = static_cast<T>(grad_avg);
      variance = square_avg - grad_avg * grad_avg;
    }
    const M avg = std::sqrt(variance) + s.eps;
    if constexpr (kMomentum) {
      const M buf = s.momentum * static_cast<M>(buf_ptr[j]) + grad / avg;
      buf_ptr[j] = static_cast<T>(buf);
      p[j] = static_cast<T>(value - s.lr * buf);
    } else {
      p[j] = static_cast<T>(value - s.lr * (grad / avg));
    }
  }
}

template <typename T>
void rmsprop_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                   const std::vector<Tensor>& grad_avgs, const Backend::RmspropStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const ListPointers<T> p(params), g(grads), sq(square_avgs), b(momentum_buffers), ga(grad_avgs);
  const RmspropScalars<M> s{.unscale = static_cast<M>(o.maximize ? -inv_scale : inv_scale),
                            .lr = static_cast<M>(o.lr),
                            .wd = static_cast<M>(o.weight_decay),
                            .alpha = static_cast<M>(o.alpha),
                            .one_minus_alpha = static_cast<M>(1.0 - o.alpha),
                            .eps = static_cast<M>(o.eps),
                            .momentum = static_cast<M>(o.momentum)};
  with_flags([&]<bool kCoupledDecay, bool kCentered, bool kMomentum>() {
    multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
      rmsprop_range<T, kCoupledDecay, kCentered, kMomentum>(p[c.tensor], g[c.tensor], sq[c.tensor], b[c.tensor],
                                                            ga[c.tensor], c.begin, c.end, s);
    });
  }, o.weight_decay != 0, o.centered, o.momentum > 0);
}

}  // namespace

void CpuBackend::sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& momentum_buffers, const SgdStepParams& options,
                          const AmpStepArgs& amp) {
  const AmpValues values = read_amp_args(amp);
  if (values.skip || params.empty()) return;
  visit_dtype<kFloatingTypes>(params[0].dtype(), "sgd_step", [&]<typename T>() {
    sgd_typed<T>(params, grads, momentum_buffers, options, values.inv_scale);
  });
}

void CpuBackend::adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                           const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                           const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                           const AdamStepParams& options, const AmpStepArgs& amp) {
  const AmpValues values = read_amp_args(amp);
  if (values.skip || params.empty()) return;
  visit_dtype<kFloatingTypes>(params[0].dtype(), "adam_step", [&]<typename T>() {
    adam_typed<T>(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, options, values.inv_scale);
  });
}

void CpuBackend::rmsprop_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                              const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                              const std::vector<Tensor>& grad_avgs, const RmspropStepParams& options,
                              const AmpStepArgs& amp) {
  const AmpValues values = read_amp_args(amp);
  if (values.skip || params.empty()) return;
  visit_dtype<kFloatingTypes>(params[0].dtype(), "rmsprop_step", [&]<typename T>() {
    rmsprop_typed<T>(params, grads, square_avgs, momentum_buffers, grad_avgs, options, values.inv_scale);
  });
}

void CpuBackend::increment_steps(const std::vector<Tensor>& steps, const Tensor& found_inf) {
  if (found_inf.defined() && found_inf.data_ptr<float>()[0] != 0.0f) return;
  for (const Tensor& step : steps) step.data_ptr<float>()[0] += 1.0f;
}

}  // namespace kiln::cpu
