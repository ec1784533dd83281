// The bundled models (nn/models/) on the GPU against the CPU: ResNet-18 (MedMNIST family),
// ResNet-50 with MedicalNet's segmentation head (its transposed convolution: cuDNN's
// backward-data as a forward) and DenseNet-121 in its memory-efficient mode (checkpoint
// recompute on the device), each with the formula weights of tests/nn/models/
// make_fixtures.py on a random batch. Skips without a GPU.
//
// float32, training mode: the output to 1e-3 relative, the input's and every parameter's
// gradient to 2e-2 (a ReLU whose input lies within rounding of 0 may flip between two
// float32 runs and move a batch-norm bias's gradient by one term of its sum, ~1e-3 per
// flip: tests/nn/models/model_fixture.cpp); ResNet-50's gradients to 5e-2, as they cancel
// through 50 layers of batch norm (PyTorch's own float32 run is 2.6% off its float64 one
// on such a network: make_fixtures.py). DenseNet-121 uses the small-input stem at 32^3 so
// its last block's batch statistics span 4^3 x 2 values (at 1^3 x 2 they make float32
// meaningless, on any framework). Autocast float16 and bfloat16 on the GPU against the
// CPU's float32, in eval mode: the output to 2e-2 (float16) and 8e-2 (bfloat16), the input
// gradient to 1e-1 and 2e-1 (ResNet-50's: 2.5e-1 and 5e-1, for the same cancellation):
// the half types' rounding through 18-121 layers, far below what a wrong kernel gives.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "core/ops.h"
#include "nn/nn.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/nn/models/model_fixture.h"

namespace kiln {
namespace {

using namespace nn::models;
using testing::kCuda;
using testing::relative_error;

struct ModelCase {
  std::string name;
  std::function<std::shared_ptr<nn::Layer>()> make;
  std::vector<int64_t> input;
  double gradient_scale = 1.0;  // how much looser its gradients' tolerances are
};

std::vector<ModelCase> model_cases() {
  return {
      {"ResNet-18 MedMNIST",
       [] { return std::make_shared<ResNet3d>(ResNet3dOptions{.depth = 18}); },
       {2, 1, 16, 16, 16}},
      {"ResNet-50 MedicalNet segmentation",
       [] {
         return std::make_shared<ResNet3d>(ResNet3dOptions{.depth = 50,
                                                           .num_classes = 3,
                                                           .family = ResNet3dFamily::MedicalNet,
                                                           .head = ResNet3dHead::Segmentation});
       },
       {2, 1, 24, 24, 24},
       2.5},
      {"DenseNet-121 memory-efficient",
       [] {
         return std::make_shared<DenseNet3d>(
             DenseNet3dOptions{.depth = 121, .stem = DenseNet3dStem::SmallInput, .memory_efficient = true});
       },
       {2, 1, 32, 32, 32}},
  };
}

struct ModelRun {
  Tensor output, input_grad;
  nn::NamedTensors grads;
};

// One forward and backward of a fresh model (formula weights) on `device`, optionally
// under autocast, the loss sum(output * w).
ModelRun run(const ModelCase& c, Device device, bool training, const Tensor& x,
             std::optional<DType> autocast) {
  const std::shared_ptr<nn::Layer> model = c.make();
  testing::fill_formula_weights(*model);
  model->to(device);
  model->train(training);
  const Tensor input = x.to(device).detach().requires_grad_(true);
  Tensor y;
  {
    const AutocastGuard guard(autocast.value_or(DType::Float16), autocast.has_value());
    y = model->forward(input);
  }
  const Tensor w = testing::random_for(y.sizes(), DType::Float32, 2).to(device);
  mul(y.to(DType::Float32), w).sum().backward();
  ModelRun r{.output = y.to(Device::cpu()), .input_grad = input.grad().to(Device::cpu()), .grads = {}};
  for (const auto& [name, p] : model->named_parameters())
    r.grads.emplace_back(name, p.grad().to(Device::cpu()));
  return r;
}

TEST(CudaModels, Float32TrainingStepMatchesCpu) {
  KILN_REQUIRE_CUDA();
  const kiln::testing::ScopedFlag no_tf32(set_allow_tf32_conv, allow_tf32_conv, false);
  for (const ModelCase& c : model_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = testing::random_for(c.input, DType::Float32, 1);
    const ModelRun cpu = run(c, Device::cpu(), true, x, std::nullopt);
    const ModelRun gpu = run(c, kCuda, true, x, std::nullopt);
    EXPECT_LE(relative_error(gpu.output, cpu.output), 1e-3);
    const double tolerance = 2e-2 * c.gradient_scale;
    EXPECT_LE(relative_error(gpu.input_grad, cpu.input_grad), tolerance);
    ASSERT_EQ(gpu.grads.size(), cpu.grads.size());
    for (size_t i = 0; i < cpu.grads.size(); ++i) {
      EXPECT_LE(relative_error(gpu.grads[i].second, cpu.grads[i].second), tolerance) << cpu.grads[i].first;
    }
  }
}

TEST(CudaModels, AutocastFloat16AndBFloat16StayNearTheCpusFloat32) {
  KILN_REQUIRE_CUDA();
  for (const ModelCase& c : model_cases()) {
    const Tensor x = testing::random_for(c.input, DType::Float32, 1);
    const ModelRun reference = run(c, Device::cpu(), false, x, std::nullopt);
    for (const DType dtype : {DType::Float16, DType::BFloat16}) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
      const ModelRun gpu = run(c, kCuda, false, x, dtype);
      const bool f16 = dtype == DType::Float16;
      EXPECT_LE(relative_error(gpu.output, reference.output), f16 ? 2e-2 : 8e-2);
      EXPECT_LE(relative_error(gpu.input_grad, reference.input_grad), (f16 ? 1e-1 : 2e-1) * c.gradient_scale);
    }
  }
}

}  // namespace
}  // namespace kiln
