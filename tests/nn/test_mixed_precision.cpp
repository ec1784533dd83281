// nn::cast_parameters (nn/mixed_precision.h): floating parameters, their gradients and
// floating buffers change dtype in place (identity kept), integer buffers do not, batch
// norm is skipped when asked; bad dtypes are errors.
#include <gtest/gtest.h>

#include <memory>

#include "core/ops.h"
#include "nn/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;

TEST(MixedPrecision, CastsParametersGradientsAndBuffersInPlace) {
  auto fc = std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 3, .out_features = 2});
  auto bn = std::make_shared<nn::BatchNorm1d>(nn::BatchNorm1dOptions{.num_features = 2});
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{fc, bn});
  sum(model->forward(ones({4, 3}))).backward();
  const Tensor weight = fc->weight, grad = fc->weight.grad().detach().clone();
  const Tensor expected = weight.detach().to(DType::BFloat16);

  nn::cast_parameters(*model, DType::BFloat16, /*keep_batchnorm_fp32=*/true);
  EXPECT_TRUE(weight.is_same(fc->weight));
  EXPECT_TRUE(all_equal(weight.detach(), expected));
  EXPECT_TRUE(all_equal(weight.grad(), grad.to(DType::BFloat16)));
  EXPECT_EQ(bn->weight.dtype(), DType::Float32);
  EXPECT_EQ(bn->running_var.dtype(), DType::Float32);
  EXPECT_TRUE(nn::is_batch_norm(*bn));
  EXPECT_FALSE(nn::is_batch_norm(*fc));

  nn::cast_parameters(*model, DType::Float16, /*keep_batchnorm_fp32=*/false);
  EXPECT_EQ(fc->weight.dtype(), DType::Float16);
  EXPECT_EQ(bn->weight.dtype(), DType::Float16);
  EXPECT_EQ(bn->running_mean.dtype(), DType::Float16);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), DType::Int64);
}

TEST(MixedPrecision, RejectsNonFloatingDtypes) {
  nn::Linear fc(nn::LinearOptions{.in_features = 3, .out_features = 2});
  EXPECT_KILN_ERROR(nn::cast_parameters(fc, DType::Int32, false), "cast_parameters", "floating", "int32");
}

}  // namespace
}  // namespace kiln
