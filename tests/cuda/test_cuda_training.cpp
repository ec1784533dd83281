// End to end on the GPU: a small perceptron trained for a few SGD steps on CUDA follows
// the same losses as the same network trained on the CPU (STYLE 11, across devices).
//
// Everything a training step touches runs on the device: parameters initialised with
// randn on the CUDA generator (Note [Philox streams]: the same numbers as the CPU's for
// the same seed), linear (cuBLAS), relu, log_softmax, a one-hot cross-entropy (eq,
// arange, mul, sum, mean), backward through all of them, an SGD-with-momentum update in
// place. The tolerance: float32 on both sides, but cuBLAS and the GPU's reductions sum in
// other orders than Eigen and the CPU's double accumulators, so each loss may differ by a
// few float32 roundings per step, which compound over steps; 1e-4 relative over 20 steps
// leaves a margin of ~10x over what such differences produce, and a wrong kernel (a
// missing transpose, an unwritten element) moves the loss by far more.
#include <gtest/gtest.h>

#include <vector>

#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

struct Mlp {
  std::vector<Tensor> weights, biases, weight_velocity, bias_velocity;
};

Mlp make_mlp(Device device, const std::vector<int64_t>& widths) {
  Generator gen(11);
  Mlp m;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const TensorOptions options{.dtype = DType::Float32, .device = device};
    m.weights.push_back(mul(randn({widths[i + 1], widths[i]}, options, &gen), 0.3).detach().requires_grad_(true));
    m.biases.push_back(zeros({widths[i + 1]}, options).requires_grad_(true));
    m.weight_velocity.push_back(zeros({widths[i + 1], widths[i]}, options));
    m.bias_velocity.push_back(zeros({widths[i + 1]}, options));
  }
  return m;
}

void sgd_step(Tensor& param, Tensor& velocity) {
  NoGradGuard no_grad;
  velocity.mul_(0.9);
  velocity.add_(param.grad());
  param.sub_(velocity, 0.05);
  param.set_grad(Tensor());
}

// The losses of `steps` SGD steps on `device`.
std::vector<double> train(Device device, int steps) {
  constexpr int64_t kClasses = 4;
  Generator data_gen(5);
  const Tensor x = randn({96, 8}, {.dtype = DType::Float32, .device = device}, &data_gen);
  const Tensor labels = randint(0, kClasses, {96}, {.dtype = DType::Int64, .device = device}, &data_gen);
  Mlp m = make_mlp(device, {8, 32, 32, kClasses});
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    Tensor h = x;
    for (size_t i = 0; i < m.weights.size(); ++i) {
      h = linear(h, m.weights[i], m.biases[i]);
      if (i + 1 < m.weights.size()) h = relu(h);
    }
    const Tensor one_hot = eq(labels.unsqueeze(1), arange(kClasses, {.dtype = DType::Int64, .device = device}))
                               .to(DType::Float32);
    const Tensor loss = neg(mul(log_softmax(h, 1), one_hot).sum({1}).mean());
    losses.push_back(loss.item<double>());
    loss.backward();
    for (size_t i = 0; i < m.weights.size(); ++i) {
      sgd_step(m.weights[i], m.weight_velocity[i]);
      sgd_step(m.biases[i], m.bias_velocity[i]);
    }
  }
  return losses;
}

// The CPU half of the comparison below, on every machine: the run must learn, or the
// comparison would prove nothing.
TEST(CudaTraining, TheCpuReferenceRunLearns) {
  const std::vector<double> cpu = train(Device::cpu(), 20);
  EXPECT_LT(cpu.back(), 0.8 * cpu.front());  // 1.63 -> 0.94 over the 20 steps
}

TEST(CudaTraining, SgdStepsFollowTheCpuLosses) {
  KILN_REQUIRE_CUDA();
  const std::vector<double> cpu = train(Device::cpu(), 20);
  const std::vector<double> gpu = train(testing::kCuda, 20);
  ASSERT_EQ(cpu.size(), gpu.size());
  EXPECT_LT(cpu.back(), 0.8 * cpu.front()) << "the CPU run did not learn: the test would prove nothing";
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * std::abs(cpu[i])) << "step " << i;
}

}  // namespace
}  // namespace kiln
