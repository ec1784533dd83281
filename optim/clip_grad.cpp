// Gradient clipping (optim/clip_grad.h), with torch.nn.utils' semantics.
//
// Note [Clipping without a host sync]: PyTorch's clip_grad_norm_ never reads the norm on
// the host (unless error_if_nonfinite asks it to), so clipping does not stall the GPU's
// queue; neither do we:
//   1. group the gradients by device (the multi-tensor ops take any dtype mix);
//   2. per device, one fused multi_tensor_norm: a [] tensor on that device;
//   3. total = the norm of the per-device norms (moved to the first device) - the norm of
//      all gradients as one vector, since ||x||_p = ||(||x_d||_p)_d||_p;
//   4. coef = min(1, max_norm / (total + 1e-6)), computed with tensor ops on the device;
//   5. per device, one fused in-place multi_tensor_scale_ by coef (a Float32 [1] tensor).
// The gradients are always multiplied, by exactly 1 when no clipping is needed, so no
// branch has to look at the value. Two kinds of gradient take an ordinary in-place
// multiply instead of the fused scale: float64 ones, which PyTorch scales by the float64
// coefficient (the fused kernel's scale is a float32), and strided ones (rare: a gradient
// is normally allocated dense, row-major or laid out as its parameter, e.g.
// channels-last), which join the norm through a contiguous copy.
#include "optim/clip_grad.h"

#include <cmath>
#include <optional>

#include "core/autograd/grad_mode.h"
#include "core/memory_format.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/multi_tensor.h"

namespace kiln::optim {
namespace {

// Dense in any layout: the multi-tensor kernels read it as one flat run.
bool is_dense(const Tensor& t) { return is_non_overlapping_and_dense(t.sizes(), t.strides()); }

struct DeviceGrads {
  Device device;
  std::vector<Tensor> fused;       // dense, not float64: scaled by the fused kernel
  std::vector<Tensor> one_by_one;  // float64 or strided: scaled by mul_
};

// The gradients of `params` that exist, grouped by device in order of first appearance.
std::vector<DeviceGrads> group_grads_by_device(const std::vector<Tensor>& params) {
  std::vector<DeviceGrads> groups;
  for (const Tensor& param : params) {
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    DeviceGrads* group = nullptr;
    for (DeviceGrads& g : groups) {
      if (g.device == grad.device()) group = &g;
    }
    if (group == nullptr) group = &groups.emplace_back(DeviceGrads{.device = grad.device(), .fused = {}, .one_by_one = {}});
    const bool fused = is_dense(grad) && grad.dtype() != DType::Float64;
    (fused ? group->fused : group->one_by_one).push_back(grad);
  }
  return groups;
}

Tensor device_norm(const DeviceGrads& group, double norm_type) {
  std::vector<Tensor> grads = group.fused;
  for (const Tensor& g : group.one_by_one) grads.push_back(is_dense(g) ? g : g.contiguous());
  return multi_tensor_norm(grads, norm_type);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  KILN_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be positive (or INFINITY), got ", norm_type);
  NoGradGuard no_grad;
  const std::vector<DeviceGrads> groups = group_grads_by_device(params);
  if (groups.empty()) return zeros({}, {.dtype = DType::Float32});

  const Device first_device = groups[0].device;
  std::vector<Tensor> norms;
  for (const DeviceGrads& group : groups) norms.push_back(device_norm(group, norm_type).to(first_device));
  const Tensor total = norms.size() == 1 ? norms[0] : multi_tensor_norm(norms, norm_type);

  if (error_if_nonfinite) {
    const double value = total.item<double>();  // the one host sync, asked for
    KILN_CHECK(std::isfinite(value), "clip_grad_norm_: the total norm of order ", norm_type,
               " of the gradients is non-finite (", value, "), so it cannot be clipped. To scale the "
               "gradients by the non-finite norm anyway, pass error_if_nonfinite = false");
  }

  // In the total's dtype (float64 when every gradient is), as a [1] tensor.
  const Tensor coef = clamp(Scalar(max_norm) / add(total, Scalar(1e-6)), std::nullopt, Scalar(1.0)).reshape({1});
  const Tensor coef_float = coef.to(DType::Float32);
  for (const DeviceGrads& group : groups) {
    multi_tensor_scale_(group.fused, group.fused, coef_float.to(group.device));
    if (group.one_by_one.empty()) continue;
    const Tensor device_coef = coef.to(group.device, DType::Float64);
    for (Tensor g : group.one_by_one) g.mul_(device_coef);  // a handle copy: the same gradient
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  KILN_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& param : params) {
    Tensor grad = param.grad();
    if (grad.defined()) grad.clamp_(Scalar(-clip_value), Scalar(clip_value));
  }
}

}  // namespace kiln::optim
