// Conv1d/2d/3d and ConvTranspose1d/2d/3d layers: weight shapes, default init bounds,
// forward against kiln::convolution / conv_transpose with the same options, output_size,
// option expansion and errors; and the dotted
// names of a small ResNet-style 3D model (Conv3d, BatchNorm3d, Sequential, ModuleList)
// exactly as PyTorch lists them.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "nn/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::random_uniform;
using Names = std::vector<std::string>;

TEST(NnConv, WeightShapesInitAndForward) {
  manual_seed(5);
  nn::Conv3d conv(nn::Conv3dOptions{.in_channels = 4, .out_channels = 6, .kernel_size = {3, 1, 3}, .stride = {2},
                                    .padding = {1, 0, 1}, .groups = 2});
  EXPECT_EQ(conv.weight.sizes(), (std::vector<int64_t>{6, 2, 3, 1, 3}));
  EXPECT_EQ(conv.bias.sizes(), std::vector<int64_t>{6});
  const double bound = 1.0 / std::sqrt(2.0 * 9.0);  // fan_in = in / groups * prod(k)
  EXPECT_LE(amax(abs(conv.weight)).item<double>(), bound);
  EXPECT_LE(amax(abs(conv.bias)).item<double>(), bound);
  const Tensor x = random_uniform({2, 4, 5, 4, 6}, -1, 1, DType::Float32, 1);
  const Tensor y = conv.forward(x);
  EXPECT_TRUE(all_equal(y, convolution(x, conv.weight, conv.bias, {2, 2, 2}, {1, 0, 1}, {1, 1, 1}, 2)));
  EXPECT_EQ(conv.to_string(), "Conv3d(4, 6, kernel_size=(3, 1, 3), stride=(2, 2, 2), padding=(1, 0, 1), groups=2)");
  EXPECT_KILN_ERROR(conv.forward(ones({2, 4, 5})), "Conv3d", "[2, 4, 5]");
}

TEST(NnConv, OneAndTwoSpatialDims) {
  nn::Conv1d conv1(nn::Conv1dOptions{.in_channels = 2, .out_channels = 3, .kernel_size = {3}, .dilation = {2},
                                     .bias = false});
  const Tensor x1 = random_uniform({2, 2, 9}, -1, 1, DType::Float32, 2);
  EXPECT_FALSE(conv1.bias.defined());
  EXPECT_TRUE(all_equal(conv1.forward(x1), conv1d(x1, conv1.weight, Tensor(), {1}, {0}, {2})));
  nn::Conv2d conv2(nn::Conv2dOptions{.in_channels = 2, .out_channels = 3, .kernel_size = {3}, .padding = {1}});
  const Tensor x2 = random_uniform({2, 2, 5, 5}, -1, 1, DType::Float32, 3);
  EXPECT_EQ(conv2.forward(x2).sizes(), (std::vector<int64_t>{2, 3, 5, 5}));
  EXPECT_TRUE(all_equal(conv2.forward(x2), conv2d(x2, conv2.weight, conv2.bias, {1}, {1})));
}

TEST(NnConv, BadOptions) {
  EXPECT_KILN_ERROR(nn::Conv3d(nn::Conv3dOptions{.in_channels = 3, .out_channels = 4, .kernel_size = {3}, .groups = 2}),
                    "Conv3d", "groups = 2");
  EXPECT_KILN_ERROR(nn::Conv2d(nn::Conv2dOptions{.in_channels = 3, .out_channels = 4, .kernel_size = {3, 3, 3}}),
                    "Conv2d", "kernel_size", "1 or 2");
  EXPECT_KILN_ERROR(nn::Conv1d(nn::Conv1dOptions{.in_channels = 3, .out_channels = 4, .kernel_size = {0}}),
                    "Conv1d", "kernel_size");
}

TEST(NnConvTranspose, WeightShapesInitAndForward) {
  manual_seed(6);
  nn::ConvTranspose3d up(nn::ConvTranspose3dOptions{.in_channels = 4,
                                                    .out_channels = 6,
                                                    .kernel_size = {3, 2, 3},
                                                    .stride = {2},
                                                    .padding = {1, 0, 1},
                                                    .output_padding = {1, 0, 0},
                                                    .groups = 2});
  EXPECT_EQ(up.weight.sizes(), (std::vector<int64_t>{4, 3, 3, 2, 3}));  // [in, out / groups, k...]
  EXPECT_EQ(up.bias.sizes(), std::vector<int64_t>{6});
  const double bound = 1.0 / std::sqrt(3.0 * 18.0);  // PyTorch's fan_in: weight.size(1) x prod(k)
  EXPECT_LE(amax(abs(up.weight)).item<double>(), bound);
  EXPECT_GT(amax(abs(up.weight)).item<double>(), 0.5 * bound);
  EXPECT_LE(amax(abs(up.bias)).item<double>(), bound);
  const Tensor x = random_uniform({2, 4, 3, 4, 2}, -1, 1, DType::Float32, 1);
  const Tensor y = up.forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 6, 6, 8, 3}));
  EXPECT_TRUE(all_equal(y, conv_transpose3d(x, up.weight, up.bias, {2}, {1, 0, 1}, {1, 0, 0}, 2)));
  EXPECT_EQ(up.type_name(), "ConvTranspose3d");
  EXPECT_EQ(up.to_string(),
            "ConvTranspose3d(4, 6, kernel_size=(3, 2, 3), stride=(2, 2, 2), padding=(1, 0, 1), "
            "output_padding=(1, 0, 0), groups=2)");
  EXPECT_EQ(up.named_parameters().size(), 2u);
  EXPECT_KILN_ERROR(up.forward(ones({2, 4, 5})), "ConvTranspose3d", "[2, 4, 5]");
}

// output_size picks the output_padding: sizes 5..6 are valid for a stride-2 upsampling of 3.
TEST(NnConvTranspose, OutputSizeChoosesTheOutputPadding) {
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions{
      .in_channels = 2, .out_channels = 2, .kernel_size = {3}, .stride = {2}, .padding = {1}});
  const Tensor x = random_uniform({1, 2, 3, 3}, -1, 1, DType::Float32, 2);
  EXPECT_EQ(up.forward(x).sizes(), (std::vector<int64_t>{1, 2, 5, 5}));
  const Tensor y = up.forward(x, {6, 5});
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{1, 2, 6, 5}));
  EXPECT_TRUE(all_equal(y, conv_transpose2d(x, up.weight, up.bias, {2}, {1}, {1, 0})));
  EXPECT_EQ(up.forward(x, {1, 2, 6, 6}).sizes(), (std::vector<int64_t>{1, 2, 6, 6}));
  EXPECT_KILN_ERROR(up.forward(x, {7, 5}), "ConvTranspose2d", "output size of [7, 5]", "range from 5 to 6");
  EXPECT_KILN_ERROR(up.forward(x, {4, 5}), "range from 5 to 6");
  EXPECT_KILN_ERROR(up.forward(x, {5}), "2 (spatial) or 4 values");
}

TEST(NnConvTranspose, OneSpatialDimAndBadOptions) {
  nn::ConvTranspose1d up(nn::ConvTranspose1dOptions{
      .in_channels = 2, .out_channels = 3, .kernel_size = {3}, .bias = false, .dilation = {2}});
  EXPECT_FALSE(up.bias.defined());
  const Tensor x = random_uniform({2, 2, 5}, -1, 1, DType::Float32, 3);
  EXPECT_TRUE(all_equal(up.forward(x), conv_transpose1d(x, up.weight, Tensor(), {1}, {0}, {0}, 1, {2})));
  EXPECT_KILN_ERROR(
      nn::ConvTranspose3d(nn::ConvTranspose3dOptions{
          .in_channels = 2, .out_channels = 2, .kernel_size = {2}, .stride = {2}, .output_padding = {2}}),
      "ConvTranspose3d", "output_padding", "smaller than either the stride");
  EXPECT_KILN_ERROR(nn::ConvTranspose2d(nn::ConvTranspose2dOptions{
                        .in_channels = 3, .out_channels = 4, .kernel_size = {3}, .groups = 2}),
                    "ConvTranspose2d", "groups = 2");
}

// torchvision-style basic block in 3D: conv-bn-relu-conv-bn plus a downsample branch.
class BasicBlock : public nn::Layer {
 public:
  BasicBlock(int64_t in, int64_t out) {
    conv1 = register_module("conv1", std::make_shared<nn::Conv3d>(nn::Conv3dOptions{
                                         .in_channels = in, .out_channels = out, .kernel_size = {3}, .padding = {1},
                                         .bias = false}));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = out}));
    conv2 = register_module("conv2", std::make_shared<nn::Conv3d>(nn::Conv3dOptions{
                                         .in_channels = out, .out_channels = out, .kernel_size = {3}, .padding = {1},
                                         .bias = false}));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = out}));
    downsample = register_module("downsample", std::make_shared<nn::Sequential>());
    downsample->push_back(std::make_shared<nn::Conv3d>(
        nn::Conv3dOptions{.in_channels = in, .out_channels = out, .kernel_size = {1}, .bias = false}));
    downsample->push_back(std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = out}));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = bn2->forward(conv2->forward(relu(bn1->forward(conv1->forward(x)))));
    return relu(add(h, downsample->forward(x)));
  }
  std::string type_name() const override { return "BasicBlock"; }
  std::shared_ptr<nn::Conv3d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm3d> bn1, bn2;
  std::shared_ptr<nn::Sequential> downsample;
};

class TinyResNet : public nn::Layer {
 public:
  TinyResNet() {
    conv1 = register_module("conv1", std::make_shared<nn::Conv3d>(
                                         nn::Conv3dOptions{.in_channels = 1, .out_channels = 2, .kernel_size = {3},
                                                           .padding = {1}, .bias = false}));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = 2}));
    layer1 = register_module("layer1", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
                                           std::make_shared<BasicBlock>(2, 3)}));
    heads = register_module("heads", std::make_shared<nn::ModuleList>());
    heads->push_back(std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 3, .out_features = 2}));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = layer1->forward(relu(bn1->forward(conv1->forward(x))));
    return heads->at<nn::Linear>(0)->forward(mean(h, {2, 3, 4}));  // global average pool
  }
  std::string type_name() const override { return "TinyResNet"; }
  std::shared_ptr<nn::Conv3d> conv1;
  std::shared_ptr<nn::BatchNorm3d> bn1;
  std::shared_ptr<nn::Sequential> layer1;
  std::shared_ptr<nn::ModuleList> heads;
};

Names bn_entries(const std::string& prefix) {
  return {prefix + ".weight", prefix + ".bias", prefix + ".running_mean", prefix + ".running_var",
          prefix + ".num_batches_tracked"};
}

TEST(NnModuleNames, ResNetStyleModelMatchesPyTorch) {
  TinyResNet net;
  Names expected = {"conv1.weight"};
  auto append = [&](const Names& more) { expected.insert(expected.end(), more.begin(), more.end()); };
  append(bn_entries("bn1"));
  append({"layer1.0.conv1.weight"});
  append(bn_entries("layer1.0.bn1"));
  append({"layer1.0.conv2.weight"});
  append(bn_entries("layer1.0.bn2"));
  append({"layer1.0.downsample.0.weight"});
  append(bn_entries("layer1.0.downsample.1"));
  append({"heads.0.weight", "heads.0.bias"});
  Names state_names;
  for (const auto& [name, t] : net.state_dict()) state_names.push_back(name);
  EXPECT_EQ(state_names, expected);
  Names module_names;
  for (const auto& [name, m] : net.named_modules()) module_names.push_back(name);
  EXPECT_EQ(module_names, (Names{"", "conv1", "bn1", "layer1", "layer1.0", "layer1.0.conv1", "layer1.0.bn1",
                                 "layer1.0.conv2", "layer1.0.bn2", "layer1.0.downsample", "layer1.0.downsample.0",
                                 "layer1.0.downsample.1", "heads", "heads.0"}));
  Names param_names;
  for (const auto& [name, t] : net.named_parameters()) param_names.push_back(name);
  EXPECT_EQ(param_names.size(), 1u + 2 + 1 + 2 + 1 + 2 + 1 + 2 + 2);
  EXPECT_EQ(param_names[1], "bn1.weight");
  EXPECT_EQ(param_names[3], "layer1.0.conv1.weight");
}

TEST(NnModuleNames, ResNetStyleRoundTripAndToDType) {
  manual_seed(1);
  TinyResNet source;
  manual_seed(2);
  TinyResNet fresh;
  const Tensor x = random_uniform({2, 1, 4, 4, 4}, -1, 1, DType::Float32, 7);
  source.forward(x);  // moves the running statistics and num_batches_tracked
  source.eval();
  fresh.eval();
  fresh.load_state_dict(source.state_dict());
  EXPECT_TRUE(all_equal(fresh.forward(x), source.forward(x)));
  EXPECT_EQ(fresh.bn1->num_batches_tracked.item<int64_t>(), 1);
  fresh.to(DType::Float64);
  EXPECT_EQ(fresh.bn1->running_mean.dtype(), DType::Float64);
  EXPECT_EQ(fresh.bn1->num_batches_tracked.dtype(), DType::Int64);
  EXPECT_TRUE(testing::all_close(fresh.forward(x.to(DType::Float64)).to(DType::Float32), source.forward(x)));
}

}  // namespace
}  // namespace kiln
