// Multi-tensor ops (core/ops/multi_tensor.h): check the lists, drop empty tensors, and
// make one backend call with autograd off.
//
// The checks give the backend what Note [Multi-tensor kernels] (core/backend.h) lets it
// assume: every tensor defined, floating point, dense and on the lead list's device
// (params, src, tensors, steps); the i-th entries of the parallel lists of equal numel and
// laid out alike (Note [Optimizer layouts] in optim/optimizer.cpp);
// one dtype across an optimizer step's lists; step counters Float32 []; AMP tensors
// Float32 [1]. A failure names the op, the list and the index. Entries whose lead tensor
// is empty are dropped from every parallel list at once, so indices stay aligned. Every
// tensor a call may write gets its version counter bumped (Note [Version counter]).
#include "core/ops/multi_tensor.h"

#include <cmath>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"

namespace kiln {
namespace {

using TensorList = std::vector<Tensor>;

// One entry of a list: defined, floating point, dense (contiguous, or another dense
// layout such as channels-last: the kernels read it as one flat run), on `device`.
void check_entry(const char* op, const char* list, size_t i, const Tensor& t, Device device) {
  KILN_CHECK(t.defined(), op, ": ", list, "[", i, "] is undefined");
  KILN_CHECK(t.is_floating_point(), op, ": ", list, "[", i, "] has dtype ", t.dtype(),
             "; only floating point tensors are supported");
  KILN_CHECK(is_non_overlapping_and_dense(t.sizes(), t.strides()), op, ": ", list, "[", i, "] (shape ",
             t.sizes(), ", strides ", t.strides(), ") is not dense; call contiguous() first");
  KILN_CHECK(t.device() == device, op, ": ", list, "[", i, "] is on ", t.device(),
             " but the first tensor is on ", device, "; group the tensors by device first");
}

// The lead list: every entry checked against the first one's device (and dtype when
// `one_dtype`). Returns that device (CPU for an empty list).
Device check_lead(const char* op, const char* name, const TensorList& lead, bool one_dtype) {
  if (lead.empty()) return Device::cpu();
  KILN_CHECK(lead[0].defined(), op, ": ", name, "[0] is undefined");
  const Device device = lead[0].device();
  for (size_t i = 0; i < lead.size(); ++i) {
    check_entry(op, name, i, lead[i], device);
    KILN_CHECK(!one_dtype || lead[i].dtype() == lead[0].dtype(), op, ": ", name, "[", i, "] has dtype ",
               lead[i].dtype(), " but ", name, "[0] has ", lead[0].dtype(),
               "; one call updates one dtype, group the tensors by dtype first");
  }
  return device;
}

// A list parallel to the lead: same length, and entry i like lead[i] in numel (and dtype
// when `same_dtype`).
void check_parallel(const char* op, const char* lead_name, const TensorList& lead, const char* name,
                    const TensorList& list, bool same_dtype) {
  KILN_CHECK(list.size() == lead.size(), op, ": ", name, " has ", list.size(), " tensors but ", lead_name,
             " has ", lead.size());
  if (lead.empty()) return;
  const Device device = lead[0].device();
  for (size_t i = 0; i < list.size(); ++i) {
    check_entry(op, name, i, list[i], device);
    KILN_CHECK(list[i].numel() == lead[i].numel(), op, ": ", name, "[", i, "] has shape ", list[i].sizes(),
               " (", list[i].numel(), " elements) but ", lead_name, "[", i, "] has shape ", lead[i].sizes(), " (",
               lead[i].numel(), " elements)");
    KILN_CHECK(!same_dtype || list[i].dtype() == lead[i].dtype(), op, ": ", name, "[", i, "] has dtype ",
               list[i].dtype(), " but ", lead_name, "[", i, "] has ", lead[i].dtype());
    // Element k of one flat run is element k of the other only when both are laid out alike.
    const bool same_layout =
        list[i].sizes() == lead[i].sizes()
            ? same_strides_where_it_matters(lead[i].sizes(), list[i].strides(), lead[i].strides())
            : list[i].is_contiguous() && lead[i].is_contiguous();
    KILN_CHECK(same_layout, op, ": ", name, "[", i, "] (strides ", list[i].strides(), ") is not laid out as ",
               lead_name, "[", i, "] (strides ", lead[i].strides(),
               "); the kernels pair their elements in memory order");
  }
}

// A state list present only in some configurations (momentum, amsgrad, centered).
void check_state(const char* op, const TensorList& params, const char* name, const TensorList& list,
                 bool present, const char* when_absent) {
  if (!present) {
    KILN_CHECK(list.empty(), op, ": ", name, " must be empty when ", when_absent, " (got ", list.size(),
               " tensors)");
    return;
  }
  check_parallel(op, "params", params, name, list, /*same_dtype=*/true);
}

// A single-element tensor of a fixed dtype on `device` (an AMP scale, flag or tracker).
void check_scalar(const char* op, const char* name, const Tensor& t, DType dtype, Device device) {
  if (!t.defined()) return;
  KILN_CHECK(t.dtype() == dtype && t.sizes() == std::vector<int64_t>{1}, op, ": ", name, " must be a ",
             dtype, " tensor of shape [1], got ", t.dtype(), " ", t.sizes());
  KILN_CHECK(t.device() == device, op, ": ", name, " is on ", t.device(), " but the tensors are on ", device);
}

// Note [Scheduled options on the device]: Float64 [2] on the parameters' device.
void check_scheduled(const char* op, const Tensor& scheduled, Device device) {
  if (!scheduled.defined()) return;
  KILN_CHECK(scheduled.dtype() == DType::Float64 && scheduled.sizes() == std::vector<int64_t>{2} &&
                 scheduled.is_contiguous(),
             op, ": options.scheduled must be a contiguous float64 tensor of shape [2] ({lr, momentum or beta1}), got ",
             scheduled.dtype(), " ", scheduled.sizes());
  KILN_CHECK(scheduled.device() == device, op, ": options.scheduled is on ", scheduled.device(),
             " but the tensors are on ", device);
}

void check_amp(const char* op, const AmpStepArgs& amp, Device device) {
  check_scalar(op, "amp.inv_scale", amp.inv_scale, DType::Float32, device);
  check_scalar(op, "amp.found_inf", amp.found_inf, DType::Float32, device);
}

// Step counters (Note [Step counters on the device]): Float32 [] tensors on `device`.
void check_steps(const char* op, const TensorList& steps, Device device) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const Tensor& s = steps[i];
    KILN_CHECK(s.defined(), op, ": steps[", i, "] is undefined");
    KILN_CHECK(s.dtype() == DType::Float32 && s.dim() == 0, op, ": steps[", i,
               "] must be a float32 tensor of shape [] (a step counter), got ", s.dtype(), " ", s.sizes());
    KILN_CHECK(s.device() == device, op, ": steps[", i, "] is on ", s.device(), " but the tensors are on ",
               device);
  }
}

// `list` without the entries whose lead tensor is empty (an empty list stays empty).
TensorList drop_empty(const TensorList& lead, const TensorList& list) {
  if (list.empty()) return list;
  TensorList kept;
  for (size_t i = 0; i < lead.size(); ++i) {
    if (lead[i].numel() > 0) kept.push_back(list[i]);
  }
  return kept;
}

void bump_versions(const TensorList& list) {
  for (const Tensor& t : list) t.bump_version();
}

}  // namespace

void sgd_step_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
               const SgdStepParams& options, const AmpStepArgs& amp) {
  const char* op = "sgd_step_";
  const Device device = check_lead(op, "params", params, /*one_dtype=*/true);
  check_parallel(op, "params", params, "grads", grads, /*same_dtype=*/true);
  check_state(op, params, "momentum_buffers", momentum_buffers, options.momentum != 0, "momentum is 0");
  check_amp(op, amp, device);
  check_scheduled(op, options.scheduled, device);
  const TensorList p = drop_empty(params, params), bufs = drop_empty(params, momentum_buffers);
  if (p.empty()) return;
  NoGradGuard no_grad;
  backend(device).sgd_step(p, drop_empty(params, grads), bufs, options, amp);
  bump_versions(p);
  bump_versions(bufs);
}

void adam_step_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                const TensorList& exp_avg_sqs, const TensorList& max_exp_avg_sqs, const TensorList& steps,
                const AdamStepParams& options, const AmpStepArgs& amp) {
  const char* op = "adam_step_";
  const Device device = check_lead(op, "params", params, /*one_dtype=*/true);
  check_parallel(op, "params", params, "grads", grads, /*same_dtype=*/true);
  check_state(op, params, "exp_avgs", exp_avgs, true, "");
  check_state(op, params, "exp_avg_sqs", exp_avg_sqs, true, "");
  check_state(op, params, "max_exp_avg_sqs", max_exp_avg_sqs, options.amsgrad, "amsgrad is off");
  KILN_CHECK(steps.size() == params.size(), op, ": steps has ", steps.size(), " tensors but params has ",
             params.size());
  check_steps(op, steps, device);
  check_amp(op, amp, device);
  check_scheduled(op, options.scheduled, device);
  const TensorList p = drop_empty(params, params);
  if (p.empty()) return;
  const TensorList m = drop_empty(params, exp_avgs), v = drop_empty(params, exp_avg_sqs),
                   v_max = drop_empty(params, max_exp_avg_sqs);
  NoGradGuard no_grad;
  backend(device).adam_step(p, drop_empty(params, grads), m, v, v_max, drop_empty(params, steps), options, amp);
  for (const TensorList* list : {&p, &m, &v, &v_max}) bump_versions(*list);
}

void rmsprop_step_(const TensorList& params, const TensorList& grads, const TensorList& square_avgs,
                   const TensorList& momentum_buffers, const TensorList& grad_avgs,
                   const RmspropStepParams& options, const AmpStepArgs& amp) {
  const char* op = "rmsprop_step_";
  const Device device = check_lead(op, "params", params, /*one_dtype=*/true);
  check_parallel(op, "params", params, "grads", grads, /*same_dtype=*/true);
  check_state(op, params, "square_avgs", square_avgs, true, "");
  check_state(op, params, "momentum_buffers", momentum_buffers, options.momentum > 0, "momentum is 0");
  check_state(op, params, "grad_avgs", grad_avgs, options.centered, "centered is off");
  check_amp(op, amp, device);
  check_scheduled(op, options.scheduled, device);
  const TensorList p = drop_empty(params, params);
  if (p.empty()) return;
  const TensorList sq = drop_empty(params, square_avgs), bufs = drop_empty(params, momentum_buffers),
                   ga = drop_empty(params, grad_avgs);
  NoGradGuard no_grad;
  backend(device).rmsprop_step(p, drop_empty(params, grads), sq, bufs, ga, options, amp);
  for (const TensorList* list : {&p, &sq, &bufs, &ga}) bump_versions(*list);
}

void increment_steps_(const TensorList& steps, const Tensor& found_inf) {
  if (steps.empty()) return;
  const char* op = "increment_steps_";
  KILN_CHECK(steps[0].defined(), op, ": steps[0] is undefined");
  const Device device = steps[0].device();
  check_steps(op, steps, device);
  check_scalar(op, "found_inf", found_inf, DType::Float32, device);
  NoGradGuard no_grad;
  backend(device).increment_steps(steps, found_inf);
  bump_versions(steps);
}

void multi_tensor_scale_(const TensorList& src, const TensorList& dst, const Tensor& scale,
                         const Tensor& found_inf) {
  const char* op = "multi_tensor_scale_";
  const Device device = check_lead(op, "src", src, /*one_dtype=*/false);
  if (!dst.empty()) check_parallel(op, "src", src, "dst", dst, /*same_dtype=*/false);
  check_scalar(op, "scale", scale, DType::Float32, device);
  check_scalar(op, "found_inf", found_inf, DType::Float32, device);
  const TensorList s = drop_empty(src, src), d = drop_empty(src, dst);
  if (s.empty()) return;
  NoGradGuard no_grad;
  backend(device).multi_tensor_scale(s, d, scale, found_inf);
  bump_versions(d);
  if (found_inf.defined()) found_inf.bump_version();
}

Tensor multi_tensor_norm(const TensorList& tensors, double p) {
  const char* op = "multi_tensor_norm";
  KILN_CHECK(p > 0, op, ": p must be positive (or INFINITY), got ", p);
  const Device device = check_lead(op, "tensors", tensors, /*one_dtype=*/false);
  bool all_double = !tensors.empty();
  for (const Tensor& t : tensors) all_double = all_double && t.dtype() == DType::Float64;
  Tensor out = zeros({}, TensorOptions{.dtype = all_double ? DType::Float64 : DType::Float32, .device = device});
  const TensorList kept = drop_empty(tensors, tensors);
  if (kept.empty()) return out;
  NoGradGuard no_grad;
  backend(device).multi_tensor_norm(kept, p, out);
  return out;
}

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                       double growth_factor, double backoff_factor, int64_t growth_interval,
                       double min_scale) {
  const char* op = "amp_update_scale_";
  KILN_CHECK(scale.defined() && growth_tracker.defined() && found_inf.defined(), op,
             ": scale, growth_tracker and found_inf must all be defined");
  const Device device = scale.device();
  check_scalar(op, "scale", scale, DType::Float32, device);
  check_scalar(op, "growth_tracker", growth_tracker, DType::Int32, device);
  check_scalar(op, "found_inf", found_inf, DType::Float32, device);
  KILN_CHECK(growth_interval >= 1, op, ": growth_interval must be at least 1, got ", growth_interval);
  KILN_CHECK(min_scale >= 0 && std::isfinite(min_scale), op, ": min_scale must be finite and >= 0, got ",
             min_scale);
  NoGradGuard no_grad;
  backend(device).amp_update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                   growth_interval, min_scale);
  scale.bump_version();
  growth_tracker.bump_version();
}

}  // namespace kiln
