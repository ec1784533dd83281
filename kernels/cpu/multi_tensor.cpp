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
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/multi_tensor_apply.h"

namespace kiln::cpu {
namespace {

template <typename T>
std::vector<T*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<T*> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(t.data_ptr<T>());
  return out;
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

// The gradient element as the update sees it: unscaled, negated when maximizing.
template <typename M, typename T>
M read_grad(T g, M inv_scale, bool maximize) {
  const M grad = static_cast<M>(g) * inv_scale;
  return maximize ? -grad : grad;
}

template <typename T>
void sgd_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const Backend::SgdStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const std::vector<T*> p = pointers<T>(params), g = pointers<T>(grads), b = pointers<T>(momentum_buffers);
  const M lr = static_cast<M>(o.lr), wd = static_cast<M>(o.weight_decay), momentum = static_cast<M>(o.momentum);
  const M keep = static_cast<M>(1.0 - o.dampening), unscale = static_cast<M>(inv_scale);
  const bool has_momentum = o.momentum != 0;
  multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
    T* param = p[static_cast<size_t>(c.tensor)];
    const T* grad_in = g[static_cast<size_t>(c.tensor)];
    T* buf_ptr = has_momentum ? b[static_cast<size_t>(c.tensor)] : nullptr;
    for (int64_t j = c.begin; j < c.end; ++j) {
      const M value = static_cast<M>(param[j]);
      M grad = read_grad(grad_in[j], unscale, o.maximize);
      if (wd != 0) grad += wd * value;
      if (has_momentum) {
        const M buf = o.first_step ? grad : momentum * static_cast<M>(buf_ptr[j]) + keep * grad;
        buf_ptr[j] = static_cast<T>(buf);
        grad = o.nesterov ? grad + momentum * buf : buf;
      }
      param[j] = static_cast<T>(value - lr * grad);
    }
  });
}

template <typename T>
void adam_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                const Backend::AdamStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const std::vector<T*> p = pointers<T>(params), g = pointers<T>(grads), m = pointers<T>(exp_avgs),
                        v = pointers<T>(exp_avg_sqs), v_max = pointers<T>(max_exp_avg_sqs);
  // Per tensor: step_size = lr / (1 - beta1^step), sqrt(1 - beta2^step), in double.
  std::vector<M> step_size(params.size()), bias_correction2_sqrt(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const double step = steps[i].data_ptr<float>()[0];
    step_size[i] = static_cast<M>(o.lr / (1.0 - std::pow(o.beta1, step)));
    bias_correction2_sqrt[i] = static_cast<M>(std::sqrt(1.0 - std::pow(o.beta2, step)));
  }
  const M wd = static_cast<M>(o.weight_decay), decay = static_cast<M>(1.0 - o.lr * o.weight_decay);
  const M beta2 = static_cast<M>(o.beta2), one_minus_beta1 = static_cast<M>(1.0 - o.beta1);
  const M one_minus_beta2 = static_cast<M>(1.0 - o.beta2), eps = static_cast<M>(o.eps);
  const M unscale = static_cast<M>(inv_scale);
  multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
    const size_t i = static_cast<size_t>(c.tensor);
    for (int64_t j = c.begin; j < c.end; ++j) {
      M value = static_cast<M>(p[i][j]);
      M grad = read_grad(g[i][j], unscale, o.maximize);
      if (wd != 0) {
        if (o.decoupled_weight_decay) value *= decay;
        else grad += wd * value;
      }
      const M exp_avg = lerp(static_cast<M>(m[i][j]), grad, one_minus_beta1);
      const M exp_avg_sq = beta2 * static_cast<M>(v[i][j]) + one_minus_beta2 * grad * grad;
      m[i][j] = static_cast<T>(exp_avg);
      v[i][j] = static_cast<T>(exp_avg_sq);
      M second_moment = exp_avg_sq;
      if (o.amsgrad) {
        second_moment = maximum(static_cast<M>(v_max[i][j]), exp_avg_sq);
        v_max[i][j] = static_cast<T>(second_moment);
      }
      const M denom = std::sqrt(second_moment) / bias_correction2_sqrt[i] + eps;
      p[i][j] = static_cast<T>(value + (-step_size[i]) * (exp_avg / denom));
    }
  });
}

template <typename T>
void rmsprop_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                   const std::vector<Tensor>& grad_avgs, const Backend::RmspropStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const std::vector<T*> p = pointers<T>(params), g = pointers<T>(grads), sq = pointers<T>(square_avgs),
                        b = pointers<T>(momentum_buffers), ga = pointers<T>(grad_avgs);
  const M lr = static_cast<M>(o.lr), wd = static_cast<M>(o.weight_decay), alpha = static_cast<M>(o.alpha);
  const M one_minus_alpha = static_cast<M>(1.0 - o.alpha), eps = static_cast<M>(o.eps);
  const M momentum = static_cast<M>(o.momentum), unscale = static_cast<M>(inv_scale);
  const bool has_momentum = o.momentum > 0;
  multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
    const size_t i = static_cast<size_t>(c.tensor);
    for (int64_t j = c.begin; j < c.end; ++j) {
      const M value = static_cast<M>(p[i][j]);
      M grad = read_grad(g[i][j], unscale, o.maximize);
      if (wd != 0) grad += wd * value;
      const M square_avg = alpha * static_cast<M>(sq[i][j]) + one_minus_alpha * grad * grad;
      sq[i][j] = static_cast<T>(square_avg);
      M avg;
      if (o.centered) {
        const M grad_avg = lerp(static_cast<M>(ga[i][j]), grad, one_minus_alpha);
        ga[i][j] = static_cast<T>(grad_avg);
        avg = std::sqrt(square_avg - grad_avg * grad_avg) + eps;
      } else {
        avg = std::sqrt(square_avg) + eps;
      }
      if (has_momentum) {
        const M buf = momentum * static_cast<M>(b[i][j]) + grad / avg;
        b[i][j] = static_cast<T>(buf);
        p[i][j] = static_cast<T>(value - lr * buf);
      } else {
        p[i][j] = static_cast<T>(value - lr * (grad / avg));
      }
    }
  });
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
