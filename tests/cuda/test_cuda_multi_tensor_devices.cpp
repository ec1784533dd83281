// The multi-tensor op layer's device checks (core/ops/multi_tensor.cpp), which need a
// second device to trigger: a list mixing CPU and CUDA tensors, and AMP tensors on the
// wrong device, are errors naming the list and index before any kernel runs. Also
// clip_grad_norm_ over gradients on two devices against a CPU reference. Skips without a
// GPU.
#include <cmath>

#include "core/ops/multi_tensor.h"
#include "optim/clip_grad.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;

TEST(CudaMultiTensorDevices, MixedDevicesAreErrors) {
  KILN_REQUIRE_CUDA();
  const std::vector<Tensor> mixed = {zeros({3}), zeros({3}, {.dtype = DType::Float32, .device = kCuda})};
  EXPECT_KILN_ERROR(sgd_step_(mixed, mixed, {}, {.lr = 1}), "sgd_step_", "params[1]", "group the tensors by device");
  const std::vector<Tensor> cpu = {zeros({3})};
  const std::vector<Tensor> gpu = {zeros({3}, {.dtype = DType::Float32, .device = kCuda})};
  EXPECT_KILN_ERROR(sgd_step_(cpu, gpu, {}, {.lr = 1}), "grads[0]");
  EXPECT_KILN_ERROR(multi_tensor_norm(mixed), "multi_tensor_norm", "tensors[1]");
  EXPECT_KILN_ERROR(multi_tensor_scale_(gpu, gpu, zeros({1})), "multi_tensor_scale_", "scale");
  EXPECT_KILN_ERROR(
      sgd_step_(gpu, gpu, {}, {.lr = 1}, {.inv_scale = Tensor(), .found_inf = zeros({1})}), "amp.found_inf");
  EXPECT_KILN_ERROR(adam_step_(gpu, gpu, gpu, gpu, {}, {scalar_tensor(1.0f)}, {.lr = 1}), "steps[0]");
}

TEST(CudaMultiTensorDevices, ClipGradNormAcrossDevices) {
  KILN_REQUIRE_CUDA();
  Tensor a = zeros({100}).requires_grad_(true), b = zeros({50}, {.dtype = DType::Float32, .device = kCuda}).requires_grad_(true);
  a.set_grad(testing::random_uniform({100}, -1, 1, DType::Float32, 1));
  b.set_grad(testing::random_uniform({50}, -1, 1, DType::Float32, 2).to(kCuda));
  const Tensor all = cat({a.grad(), b.grad().cpu()}).to(DType::Float64);
  const double norm = std::sqrt(all.mul(all).sum().item<double>());
  const Tensor total = optim::clip_grad_norm_({a, b}, 0.5 * norm);
  EXPECT_EQ(total.device(), Device::cpu());  // the first gradient's device
  EXPECT_NEAR(total.item<double>(), norm, 1e-5 * norm);
  const Tensor clipped = cat({a.grad(), b.grad().cpu()}).to(DType::Float64);
  EXPECT_TRUE(testing::all_close(clipped, all.mul(scalar_tensor(0.5 * norm / (norm + 1e-6), {.dtype = DType::Float64})),
                                 testing::tolerance_for(DType::Float32)));
}

}  // namespace
}  // namespace kiln
