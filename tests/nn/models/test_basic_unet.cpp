// BasicUNet (nn/models/basic_unet.h) equals MONAI's BasicUNet with the same weights: the
// state-dict names, the training-mode output at odd sizes, the input and parameter
// gradients and the batch-norm statistics, in float64 to 1e-9 and in float32 to a stated
// tolerance (tests/nn/models/basic_unet/make_fixtures.py, monai 1.6.1); bad options.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npz.h"
#include "nn/models/basic_unet.h"
#include "tests/nn/models/formula_weights.h"
#include "tests/test_util.h"

namespace kiln::nn::models {
namespace {

const data::npz::File& fixture() {
  static const data::npz::File file(std::string(KILN_SOURCE_DIR) +
                                    "/tests/nn/models/basic_unet/basic_unet.npz");
  return file;
}

using testing::formula_pattern;

struct Case {
  std::string name;
  BasicUNetOptions options;
};
const std::vector<int64_t> kFeatures = {4, 4, 6, 6, 8, 4};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"default", {.in_channels = 1, .out_channels = 3, .features = kFeatures}},
      {"batch_prelu_trilinear",
       {.in_channels = 2,
        .out_channels = 2,
        .features = kFeatures,
        .act = UNetActivation::PReLU,
        .norm = UNetNorm::Batch,
        .upsample = UNetUpsample::Trilinear}},
      {"group_relu_no_bias",
       {.in_channels = 1,
        .out_channels = 2,
        .features = kFeatures,
        .act = UNetActivation::ReLU,
        .norm = UNetNorm::Group,
        .bias = false,
        .num_groups = 2}},
  };
  return all;
}

// The case's network with the fixture's weights, in `dtype`, in training mode.
std::shared_ptr<BasicUNet> network(const Case& c, DType dtype) {
  auto net = std::make_shared<BasicUNet>(c.options);
  net->to(dtype);
  NoGradGuard no_grad;
  for (auto& [key, p] : net->named_parameters()) {
    std::vector<int64_t> shape(p.sizes().begin(), p.sizes().end());
    p.copy_(testing::formula_weight(key, shape, "N.weight").to(dtype));
  }
  net->train();
  return net;
}

Tensor input_of(const Case& c) {
  return mul(formula_pattern({1, c.options.in_channels, 32, 18, 17}, 0.37, 0.11), 1.5);
}

void check_against_monai(const Case& c, DType dtype, testing::Tolerance tol) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  auto net = network(c, dtype);
  const Tensor x = input_of(c).to(dtype).requires_grad_(true);
  const Tensor y = net->forward(x);
  const Tensor expected = fixture().load(c.name + "/output");
  ASSERT_EQ(y.sizes(), expected.sizes());
  EXPECT_TRUE(testing::all_close(y.to(DType::Float64), expected, tol));
  std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
  mul(y, formula_pattern(shape, 0.23, 0.0, /*cosine=*/true).to(dtype)).sum().backward();
  EXPECT_TRUE(testing::all_close(x.grad().to(DType::Float64), fixture().load(c.name + "/grad/input"), tol));
  for (const auto& [key, p] : net->named_parameters()) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(
        testing::all_close(p.grad().to(DType::Float64), fixture().load(c.name + "/grad/" + key), tol));
  }
  for (const auto& [key, b] : net->named_buffers()) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(testing::all_close(b.to(DType::Float64),
                                   fixture().load(c.name + "/after/" + key).to(DType::Float64), tol));
  }
}

TEST(BasicUNet, HasMonaisStateDictNames) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::set<std::string> monai, kiln;
    const std::string grad = c.name + "/grad/", after = c.name + "/after/";
    for (const data::npz::Array& a : fixture().arrays()) {
      if (a.key.starts_with(grad) && a.key != grad + "input") monai.insert(a.key.substr(grad.size()));
      if (a.key.starts_with(after)) monai.insert(a.key.substr(after.size()));
    }
    for (const auto& [key, t] : BasicUNet(c.options).state_dict()) kiln.insert(key);
    EXPECT_EQ(kiln, monai);
    EXPECT_GT(monai.size(), 50u);
  }
}

TEST(BasicUNet, OutputsAndGradientsEqualMonaisInFloat64) {
  for (const Case& c : cases()) check_against_monai(c, DType::Float64, {1e-9, 1e-9});
}

// float32 runs every layer in float32: instance norm over a few voxels at the bottom and
// 18 layers deep, values agree to 9e-5 of their scale at worst (measured): 3e-4 allowed.
TEST(BasicUNet, OutputsAndGradientsAgreeInFloat32) {
  for (const Case& c : cases()) check_against_monai(c, DType::Float32, {3e-4, 3e-4});
}

TEST(BasicUNet, BadOptionsAndInputsAreErrors) {
  EXPECT_KILN_ERROR(BasicUNet({.features = {4, 4}}), "BasicUNet", "6 entries");
  EXPECT_KILN_ERROR(BasicUNet({.features = {4, 4, 6, 0, 8, 4}}), "BasicUNet", "positive");
  EXPECT_KILN_ERROR(BasicUNet({.features = {4, 4, 6, 6, 8, 4}, .norm = UNetNorm::Group, .num_groups = 4}),
                    "BasicUNet", "num_groups 4 does not divide 6");
  EXPECT_KILN_ERROR(BasicUNet({.dropout = 1.5}), "BasicUNet", "dropout");
  BasicUNet net({.features = kFeatures});
  EXPECT_KILN_ERROR(net.forward(zeros({1, 1, 16, 16})), "BasicUNet", "[N, 1, D, H, W]");
  EXPECT_KILN_ERROR(net.forward(zeros({1, 2, 16, 16, 16})), "BasicUNet", "[N, 1, D, H, W]");
  EXPECT_KILN_ERROR(net.forward(zeros({1, 1, 16, 15, 16})), "BasicUNet", "at least 16");
}

}  // namespace
}  // namespace kiln::nn::models
