// layer_norm, group_norm and instance_norm (core/ops/normalization.h) on the GPU: outputs,
// input / weight / bias gradients and instance norm's running statistics equal the CPU's
// in every floating dtype, on contiguous and non-contiguous inputs. The ops are composites
// (var_mean, elementwise, batch_norm), so this checks their pieces together on the device.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <functional>

#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
using Norm = std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)>;

void check_norm(const char* name, const std::vector<int64_t>& shape, const std::vector<int64_t>& param_shape,
                const Norm& norm) {
  for (DType dtype : testing::kFloatingDTypes) {
    for (const bool strided : {false, true}) {
      SCOPED_TRACE(::testing::Message() << name << " " << dtype << (strided ? " strided" : ""));
      const Tensor x = testing::random_for(shape, dtype, 3);
      const Tensor w = testing::random_for(param_shape, dtype, 4),
                   b = testing::random_for(param_shape, dtype, 5);
      const auto leaves = [&](Device device, bool layout) {
        return std::vector<Tensor>{testing::on_device(x, device, layout).detach().requires_grad_(true),
                                   w.to(device).detach().requires_grad_(true),
                                   b.to(device).detach().requires_grad_(true)};
      };
      const std::vector<Tensor> cpu = leaves(Device::cpu(), false), gpu = leaves(kCuda, strided);
      const Tensor y_cpu = norm(cpu[0], cpu[1], cpu[2]), y_gpu = norm(gpu[0], gpu[1], gpu[2]);
      EXPECT_TRUE(testing::matches_cpu(y_gpu, y_cpu, 8.0));
      const Tensor g = testing::random_for(y_cpu.sizes(), dtype, 6);
      mul(y_cpu, g).sum().backward();
      mul(y_gpu, g.to(kCuda)).sum().backward();
      for (size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(testing::matches_cpu(gpu[i].grad(), cpu[i].grad(), 32.0)) << i;
    }
  }
}

TEST(CudaNormalization, OutputsAndGradientsMatchCpu) {
  KILN_REQUIRE_CUDA();
  check_norm("layer_norm", {2, 3, 4, 5}, {4, 5}, [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return layer_norm(x, {4, 5}, w, b);
  });
  check_norm("group_norm", {2, 6, 3, 4, 2}, {6},
             [](const Tensor& x, const Tensor& w, const Tensor& b) { return group_norm(x, 3, w, b); });
  check_norm("instance_norm", {2, 3, 4, 3, 5}, {3}, [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return instance_norm(x, {}, {}, w, b);
  });
}

TEST(CudaNormalization, InstanceNormRunningStatisticsMatchCpu) {
  KILN_REQUIRE_CUDA();
  const Tensor x = testing::random_for({2, 3, 4, 3, 5}, DType::Float32, 7);
  Tensor mean_cpu = zeros({3}), var_cpu = ones({3});
  Tensor mean_gpu = zeros({3}).to(kCuda), var_gpu = ones({3}).to(kCuda);
  instance_norm(x, mean_cpu, var_cpu, {}, {}, true, 0.2);
  instance_norm(x.to(kCuda), mean_gpu, var_gpu, {}, {}, true, 0.2);
  EXPECT_TRUE(testing::matches_cpu(mean_gpu, mean_cpu, 8.0));
  EXPECT_TRUE(testing::matches_cpu(var_gpu, var_cpu, 8.0));
}

}  // namespace
}  // namespace kiln
