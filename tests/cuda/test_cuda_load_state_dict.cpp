// Loading state dicts from the host into a GPU model and a GPU optimizer (Note
// [All-or-nothing loads] in core/safetensors.h): with nothing to convert, a model's load
// takes no device memory at all (the commit is one host-to-device memcpy per tensor);
// with conversions, an allocation failing at any point of a load leaves the model or the
// optimizer as it was, bit for bit, and the load then runs through. Skips without a GPU.
#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "core/fault_injection.h"
#include "nn/nn.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/nn/module_test_util.h"
#include "tests/optim/optim_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;

// Linear -> ReLU -> BatchNorm1d -> Linear: float parameters and buffers, and an int64 counter.
std::shared_ptr<nn::Sequential> small_net(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 3, .out_features = 4}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::BatchNorm1d>(nn::BatchNorm1dOptions{.num_features = 4}),
      std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 4, .out_features = 2})});
}

TEST(CudaLoadStateDict, AHostStateDictLoadsIntoAGpuModelWithoutAllocating) {
  KILN_REQUIRE_CUDA();
  const auto source = small_net(1), target = small_net(2);
  target->to(kCuda);
  const nn::StateDict sd = source->state_dict();
  FailNthAllocation counter(std::numeric_limits<int64_t>::max());
  target->load_state_dict(sd);
  EXPECT_EQ(counter.allocations(), 0);
  EXPECT_TRUE(testing::holds_state_dict(*target, sd));
}

TEST(CudaLoadStateDict, AModelLoadsNothingWhenMemoryRunsOut) {
  KILN_REQUIRE_CUDA();
  const auto source = small_net(1), target = small_net(2);
  source->to(DType::Float64);
  target->to(kCuda);
  const nn::StateDict sd = source->state_dict();
  // The eight float64 tensors are converted on the host, each into a fresh tensor.
  EXPECT_EQ(testing::expect_all_or_nothing(*target, sd), 8);
  EXPECT_TRUE(testing::holds_state_dict(*target, sd));
}

TEST(CudaLoadStateDict, AnOptimizerLoadsNothingWhenMemoryRunsOut) {
  KILN_REQUIRE_CUDA();
  // A CPU Adam with masters, three steps in, whose dict lacks parameter 0's master.
  const std::vector<Tensor> cpu_params = testing::make_params(DType::Float16, 9);
  optim::Adam source(cpu_params, optim::AdamOptions{.lr = 0.01});
  source.enable_master_weights();
  for (int64_t s = 0; s < 3; ++s) {
    testing::set_step_grads(cpu_params, s);
    source.step();
  }
  optim::OptimizerStateDict dict = source.state_dict();
  std::erase_if(dict.tensors, [](const auto& entry) { return entry.first == "state.0.master_weight"; });
  // The same on the GPU, one step in.
  std::vector<Tensor> params;
  for (const Tensor& p : testing::make_params(DType::Float16))
    params.push_back(p.detach().to(kCuda).requires_grad_(true));
  optim::Adam target(params, optim::AdamOptions{.lr = 0.1});
  target.enable_master_weights();
  for (const Tensor& p : params) p.set_grad(ones_like(p));
  target.step();

  const testing::TensorsSnapshot before(target.state_dict().tensors);
  const int64_t failures =
      testing::fail_each_allocation([&] { target.load_state_dict(dict); },
                                    [&] { EXPECT_TRUE(before.same_as(target.state_dict().tensors)); });
  EXPECT_EQ(failures, static_cast<int64_t>(dict.tensors.size()) + 1);  // a copy each, and the new master
  for (const auto& [name, tensor] : target.state_dict().tensors) {
    EXPECT_EQ(tensor.device(), kCuda) << name;
    const Tensor* given = testing::find_named(dict.tensors, name);
    EXPECT_TRUE(testing::bitwise_equal(tensor, given ? *given : params[0].detach().to(DType::Float32))) << name;
  }
}

}  // namespace
}  // namespace kiln
