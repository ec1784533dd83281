// interpolate (core/ops/interpolate.h) on the GPU: outputs and input gradients equal the
// CPU's for trilinear (both align_corners) and nearest, in every floating dtype, on
// contiguous and non-contiguous inputs. interpolate is built from index_select, mul and
// add, so this checks that its taps and weights are made on the input's device. Skips
// without a GPU.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;

TEST(CudaInterpolate, OutputsAndGradientsMatchCpu) {
  KILN_REQUIRE_CUDA();
  const std::vector<InterpolateOptions> cases = {
      {.size = {5, 3, 6}, .mode = InterpolateMode::Linear},
      {.scale_factor = {1.5}, .mode = InterpolateMode::Linear, .align_corners = true},
      {.scale_factor = {0.7, 1.9, 1.2}},
  };
  for (DType dtype : testing::kFloatingDTypes) {
    for (const InterpolateOptions& options : cases) {
      for (const bool strided : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype << (strided ? " strided" : ""));
        const Tensor cpu = testing::random_for({2, 3, 4, 3, 5}, dtype, 7);
        const Tensor x_cpu = cpu.detach().requires_grad_(true);
        const Tensor x_gpu = testing::on_device(cpu, kCuda, strided).detach().requires_grad_(true);
        const Tensor y_cpu = interpolate(x_cpu, options), y_gpu = interpolate(x_gpu, options);
        EXPECT_EQ(y_gpu.device(), kCuda);
        EXPECT_TRUE(testing::matches_cpu(y_gpu, y_cpu, 4.0));
        const Tensor w = testing::random_for(y_cpu.sizes(), dtype, 8);
        mul(y_cpu, w).sum().backward();
        mul(y_gpu, w.to(kCuda)).sum().backward();
        EXPECT_TRUE(testing::matches_cpu(x_gpu.grad(), x_cpu.grad(), 16.0));
      }
    }
  }
}

}  // namespace
}  // namespace kiln
