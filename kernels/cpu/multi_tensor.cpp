// CpuBackend fused optimizer steps: SGD, Adam/AdamW and RMSprop over a whole parameter
// list in one parallel loop (kernels/cpu/multi_tensor_apply.h), plus the step counters.
//
// Math: Note [Optimizer formulas] in kernels/optimizer_math.h, the per-element functions
// the CUDA backend runs too; every update in place (=). Layout: every tensor contiguous,
// params, grads and states of one floating dtype (Note [Multi-tensor kernels]);
// float16/bfloat16 load into float, compute, and round on store (Note [Opmath]). The
// scalars (and Adam's per-tensor bias corrections) are formed once per call on the host.
// amp.found_inf non-zero: nothing is written at all.
//
// Loop shape: each optimizer has a range function (one tensor's elements [begin, end))
// whose shape-changing options are compile-time flags (optimizer_math's Static*Flags,
// picked once per call by with_flags), so the loop has no branches and GCC vectorises it
// (with Note [No math errno], kernels/cpu/CMakeLists.txt); maximize rides on the unscale
// factor's sign (negating a product is exact: -(g s) = g (-s)).
//
// Note [Scalars by value]: the range functions take their scalar structs by value. Read
// through a reference inside optimizer_math's inlined functions, a scalar may (for GCC)
// alias the __restrict outputs, so its load stays in the loop, and with it lerp's
// |w| < 0.5 branch: the loop no longer vectorises and Adam costs 5x the instructions
// (measured with callgrind, bench/results/2026-11-25-cpu-refactor-callgrind.md). A copy
// on the stack is provably unaliased, so GCC hoists the loads and unswitches the branch.
// Check with -fopt-info-vec-optimized on this file after changing a loop.
//
// Note [RMSprop stores its averages early]: the RMSprop loop calls optimizer_math's three
// pieces (rmsprop_update's steps) and stores sq and ga between them, right after they are
// computed, instead of calling rmsprop_update and storing everything afterwards. The math
// and its order are the same; what changes is that sq and ga are dead once the variance
// sq - ga ga is formed. Stored afterwards, both stay live past it, and SSE2's two-operand
// mulps/subps (no -march) then cost two extra register copies per vector: 6.7% more
// instructions for centered RMSprop, measured with callgrind
// (bench/results/2026-11-25-cpu-refactor-callgrind.md).
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/multi_tensor_apply.h"
#include "kernels/optimizer_math.h"

namespace kiln::cpu {
namespace {

namespace math = optimizer_math;

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

// The gradient factor: inv_scale, negated for maximize.
template <typename M>
M unscale_factor(float inv_scale, bool maximize) {
  return static_cast<M>(maximize ? -inv_scale : inv_scale);
}

// ---- SGD ----------------------------------------------------------------------------------

template <typename T, typename Flags>
void sgd_range(T* __restrict p, const T* __restrict g, T* __restrict buf_ptr, int64_t begin, int64_t end,
               const math::SgdScalars<opmath_t<T>> s, opmath_t<T> unscale) {
  using M = opmath_t<T>;
  constexpr Flags kFlags{};
  for (int64_t j = begin; j < end; ++j) {  // vectorised: tests/kernels/check_vectorized.cmake
    M param = static_cast<M>(p[j]);
    M buf = kFlags.momentum && !kFlags.first_step ? static_cast<M>(buf_ptr[j]) : M(0);
    math::sgd_update(param, static_cast<M>(g[j]) * unscale, buf, s, kFlags);
    if constexpr (kFlags.momentum) buf_ptr[j] = static_cast<T>(buf);
    p[j] = static_cast<T>(param);
  }
}

template <typename T>
void sgd_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const Backend::SgdStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const ListPointers<T> p(params), g(grads), b(momentum_buffers);
  const math::SgdScalars<M> s = math::sgd_scalars<M>(math::sgd_hyper(o).with(math::scheduled_values(o.scheduled)));
  const M unscale = unscale_factor<M>(inv_scale, o.maximize);
  const math::SgdFlags f = math::sgd_flags(o);
  with_flags([&]<bool... kFlags>() {
    multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
      sgd_range<T, math::StaticSgdFlags<kFlags...>>(p[c.tensor], g[c.tensor], b[c.tensor], c.begin, c.end, s,
                                                    unscale);
    });
  }, f.weight_decay, f.momentum, f.first_step, f.nesterov);
}

// ---- Adam / AdamW -------------------------------------------------------------------------

template <typename T, typename Flags>
void adam_range(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict v_max,
                int64_t begin, int64_t end, const math::AdamScalars<opmath_t<T>> s,
                const math::AdamStepSizes<opmath_t<T>> t, opmath_t<T> unscale) {
  using M = opmath_t<T>;
  constexpr Flags kFlags{};
  for (int64_t j = begin; j < end; ++j) {  // vectorised: tests/kernels/check_vectorized.cmake
    M param = static_cast<M>(p[j]), exp_avg = static_cast<M>(m[j]), exp_avg_sq = static_cast<M>(v[j]);
    M max_exp_avg_sq = kFlags.amsgrad ? static_cast<M>(v_max[j]) : M(0);
    math::adam_update(param, static_cast<M>(g[j]) * unscale, exp_avg, exp_avg_sq, max_exp_avg_sq, s, t, kFlags);
    m[j] = static_cast<T>(exp_avg);
    v[j] = static_cast<T>(exp_avg_sq);
    if constexpr (kFlags.amsgrad) v_max[j] = static_cast<T>(max_exp_avg_sq);
    p[j] = static_cast<T>(param);
  }
}

template <typename T>
void adam_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                const Backend::AdamStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const ListPointers<T> p(params), g(grads), m(exp_avgs), v(exp_avg_sqs), v_max(max_exp_avg_sqs);
  const math::AdamHyper h = math::adam_hyper(o).with(math::scheduled_values(o.scheduled));
  std::vector<math::AdamStepSizes<M>> step_sizes(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    step_sizes[i] = math::adam_step_sizes<M>(h, steps[i].data_ptr<float>()[0]);
  }
  const math::AdamScalars<M> s = math::adam_scalars<M>(h);
  const M unscale = unscale_factor<M>(inv_scale, o.maximize);
  const math::AdamFlags f = math::adam_flags(o);
  with_flags([&]<bool... kFlags>() {
    multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
      adam_range<T, math::StaticAdamFlags<kFlags...>>(p[c.tensor], g[c.tensor], m[c.tensor], v[c.tensor],
                                                      v_max[c.tensor], c.begin, c.end, s,
                                                      step_sizes[static_cast<size_t>(c.tensor)], unscale);
    });
  }, f.coupled_weight_decay, f.decoupled_weight_decay, f.amsgrad);
}

// ---- RMSprop ------------------------------------------------------------------------------

template <typename T, typename Flags>
void rmsprop_range(T* __restrict p, const T* __restrict g, T* __restrict sq, T* __restrict buf_ptr,
                   T* __restrict ga, int64_t begin, int64_t end, const math::RmspropScalars<opmath_t<T>> s,
                   opmath_t<T> unscale) {
  using M = opmath_t<T>;
  constexpr Flags kFlags{};
  for (int64_t j = begin; j < end; ++j) {  // vectorised: tests/kernels/check_vectorized.cmake
    M param = static_cast<M>(p[j]), square_avg = static_cast<M>(sq[j]);
    M buf = kFlags.momentum ? static_cast<M>(buf_ptr[j]) : M(0);
    M grad_avg = kFlags.centered ? static_cast<M>(ga[j]) : M(0);
    const M grad = math::rmsprop_grad(param, static_cast<M>(g[j]) * unscale, s, kFlags);
    math::rmsprop_averages(grad, square_avg, grad_avg, s, kFlags);
    sq[j] = static_cast<T>(square_avg);  // Note [RMSprop stores its averages early]
    if constexpr (kFlags.centered) ga[j] = static_cast<T>(grad_avg);
    math::rmsprop_apply(param, grad, square_avg, grad_avg, buf, s, kFlags);
    if constexpr (kFlags.momentum) buf_ptr[j] = static_cast<T>(buf);
    p[j] = static_cast<T>(param);
  }
}

template <typename T>
void rmsprop_typed(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                   const std::vector<Tensor>& grad_avgs, const Backend::RmspropStepParams& o, float inv_scale) {
  using M = opmath_t<T>;
  const ListPointers<T> p(params), g(grads), sq(square_avgs), b(momentum_buffers), ga(grad_avgs);
  const math::RmspropScalars<M> s =
      math::rmsprop_scalars<M>(math::rmsprop_hyper(o).with(math::scheduled_values(o.scheduled)));
  const M unscale = unscale_factor<M>(inv_scale, o.maximize);
  const math::RmspropFlags f = math::rmsprop_flags(o);
  with_flags([&]<bool... kFlags>() {
    multi_tensor_apply(chunk_list(params), [&](int64_t, const ListChunk& c) {
      rmsprop_range<T, math::StaticRmspropFlags<kFlags...>>(p[c.tensor], g[c.tensor], sq[c.tensor], b[c.tensor],
                                                            ga[c.tensor], c.begin, c.end, s, unscale);
    });
  }, f.weight_decay, f.centered, f.momentum);
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
