// The layers that need no conv / norm / pool op: Linear (forward and default init
// bounds), every activation against its functional op, Dropout and Dropout3d (whole
// channels, scaling, identity in eval), Flatten, Identity, Sequential and ModuleList, and
// the loss modules (their weights as buffers).
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "nn/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::random_uniform;

TEST(NnLinear, ForwardMatchesFunctionalAndInitIsBounded) {
  manual_seed(3);
  nn::Linear layer(nn::LinearOptions{.in_features = 16, .out_features = 8});
  const Tensor x = random_uniform({2, 5, 16}, -1, 1, DType::Float32, 1);
  const Tensor y = layer.forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_TRUE(all_equal(y, linear(x, layer.weight, layer.bias)));
  EXPECT_TRUE(all_equal(layer(x), y));
  const double bound = 1.0 / std::sqrt(16.0);  // kaiming_uniform_(a = sqrt(5)) and the bias's
  EXPECT_LE(amax(abs(layer.weight)).item<double>(), bound);
  EXPECT_LE(amax(abs(layer.bias)).item<double>(), bound);
  EXPECT_GT(amax(abs(layer.weight)).item<double>(), 0.8 * bound);
  EXPECT_KILN_ERROR(layer.forward(ones({2, 15})), "Linear", "16", "[2, 15]");
  nn::Linear no_bias(nn::LinearOptions{.in_features = 4, .out_features = 2, .bias = false});
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(no_bias.named_parameters().size(), 1u);
  EXPECT_TRUE(all_equal(no_bias.forward(ones({3, 4})), linear(ones({3, 4}), no_bias.weight)));
}

TEST(NnLinear, SameSeedSameInit) {
  manual_seed(11);
  nn::Linear a(nn::LinearOptions{.in_features = 5, .out_features = 3});
  manual_seed(11);
  nn::Linear b(nn::LinearOptions{.in_features = 5, .out_features = 3});
  EXPECT_TRUE(all_equal(a.weight, b.weight));
  Generator gen(5);
  b.reset_parameters(&gen);
  EXPECT_FALSE(all_equal(a.weight, b.weight));
}

TEST(NnActivation, EachMatchesItsFunctionalOp) {
  const Tensor x = testing::random_nonzero({2, 3, 4}, DType::Float32, 2);
  EXPECT_TRUE(all_equal(nn::ReLU().forward(x), relu(x)));
  EXPECT_TRUE(
      all_equal(nn::LeakyReLU(nn::LeakyReLUOptions{.negative_slope = 0.2}).forward(x), leaky_relu(x, 0.2)));
  EXPECT_TRUE(all_equal(nn::SiLU().forward(x), silu(x)));
  EXPECT_TRUE(all_equal(nn::Swish().forward(x), silu(x)));
  EXPECT_TRUE(all_equal(nn::Sigmoid().forward(x), sigmoid(x)));
  EXPECT_TRUE(all_equal(nn::Tanh().forward(x), tanh(x)));
  EXPECT_TRUE(all_equal(nn::GELU().forward(x), gelu(x)));
  EXPECT_TRUE(all_equal(nn::GELU(nn::GELUOptions{.approximate = "tanh"}).forward(x), gelu(x, "tanh")));
  EXPECT_TRUE(all_equal(nn::ELU(nn::ELUOptions{.alpha = 0.7}).forward(x), elu(x, 0.7)));
  EXPECT_KILN_ERROR(nn::GELU(nn::GELUOptions{.approximate = "fast"}), "GELU", "fast");
}

TEST(NnActivation, PReLULearnsOneSlopePerChannel) {
  nn::PReLU layer(nn::PReLUOptions{.num_parameters = 3, .init = 0.1});
  EXPECT_TRUE(all_equal(layer.weight, full({3}, 0.1, {.dtype = DType::Float32})));
  const Tensor x = testing::random_nonzero({2, 3, 4}, DType::Float32, 3);
  const Tensor y = layer.forward(x);
  EXPECT_TRUE(all_equal(y, prelu(x, layer.weight)));
  sum(y).backward();
  ASSERT_TRUE(layer.weight.grad().defined());
  EXPECT_EQ(layer.weight.grad().sizes(), std::vector<int64_t>{3});
  EXPECT_TRUE(all_equal(nn::PReLU().weight, full({1}, 0.25, {.dtype = DType::Float32})));
}

TEST(NnDropout, ZeroesAFractionScalesTheRestAndIsIdentityInEval) {
  nn::Dropout layer(nn::DropoutOptions{.p = 0.3});
  const Tensor x = ones({100000});
  const std::vector<float> y = layer.forward(x).to_vector<float>();
  int64_t zeros_seen = 0;
  for (float v : y) {
    if (v == 0.0f)
      ++zeros_seen;
    else
      EXPECT_NEAR(v, 1.0 / 0.7, 1e-6);
  }
  EXPECT_NEAR(static_cast<double>(zeros_seen) / 100000.0, 0.3, 0.01);
  layer.eval();
  EXPECT_TRUE(all_equal(layer.forward(x), x));
  EXPECT_KILN_ERROR(nn::Dropout(nn::DropoutOptions{.p = 1.5}), "Dropout", "1.5");
}

TEST(NnDropout3d, ZeroesWholeChannels) {
  nn::Dropout3d layer(nn::Dropout3dOptions{.p = 0.5});
  const Tensor x = add(random_uniform({4, 8, 2, 3, 3}, 0, 1, DType::Float32, 4), 1.0).requires_grad_(true);
  const Tensor y = layer.forward(x);
  const Tensor ratio = div(y, x).reshape({4 * 8, 18});  // each channel is all 0 or all 2
  int64_t dropped = 0;
  for (int64_t ch = 0; ch < 32; ++ch) {
    const std::vector<float> r = ratio.select(0, ch).to_vector<float>();
    const float first = r[0];
    EXPECT_TRUE(first == 0.0f || std::abs(first - 2.0f) < 1e-6) << first;
    for (float v : r) EXPECT_EQ(v, first) << "channel " << ch << " is not dropped as a whole";
    dropped += first == 0.0f;
  }
  EXPECT_GT(dropped, 4);
  EXPECT_LT(dropped, 28);
  sum(y).backward();  // the gradient is the mask: 0 on dropped channels, 2 elsewhere
  EXPECT_TRUE(all_close(x.grad().reshape({32, 18}), ratio.detach()));
  // Unbatched [C, D, H, W] works too; eval is the identity.
  const Tensor unbatched = layer.forward(ones({6, 2, 2, 2}));
  EXPECT_EQ(unbatched.sizes(), (std::vector<int64_t>{6, 2, 2, 2}));
  layer.eval();
  EXPECT_TRUE(all_equal(layer.forward(x), x));
  EXPECT_KILN_ERROR(layer.forward(ones({2, 3, 4})), "Dropout3d", "[2, 3, 4]");
}

TEST(NnUpsample, ResamplesAsInterpolateAndChecksItsOptionsUpFront) {
  const Tensor x = testing::random_for({1, 2, 3, 4, 2}, DType::Float32, 5);
  nn::Upsample layer({.scale_factor = {2}, .mode = InterpolateMode::Linear});
  EXPECT_TRUE(
      all_equal(layer.forward(x), interpolate(x, {.scale_factor = {2}, .mode = InterpolateMode::Linear})));
  EXPECT_EQ(layer.forward(x).sizes(), (std::vector<int64_t>{1, 2, 6, 8, 4}));
  EXPECT_TRUE(layer.parameters().empty());
  EXPECT_EQ(nn::Upsample({.size = {3, 3, 3}}).to_string(), "Upsample(size=[3, 3, 3], mode='nearest')");
  EXPECT_KILN_ERROR(nn::Upsample({}), "Upsample", "exactly one of size and scale_factor");
  EXPECT_KILN_ERROR(nn::Upsample({.size = {2}, .align_corners = true}), "Upsample", "align_corners");
}

TEST(NnNormalization, PyTorchsNamesDefaultsAndTheFunctionalOps) {
  nn::GroupNorm group({.num_groups = 2, .num_channels = 4});
  nn::LayerNorm layer({.normalized_shape = {3, 2}});
  nn::InstanceNorm3d plain({.num_features = 4});
  nn::InstanceNorm3d tracked(
      {.num_features = 4, .momentum = 0.3, .affine = true, .track_running_stats = true});
  const auto keys = [](const nn::Module& m) {
    std::vector<std::string> names;
    for (const auto& [name, t] : m.state_dict()) names.push_back(name);
    return names;
  };
  // In PyTorch's order too.
  EXPECT_EQ(keys(group), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(keys(layer), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_TRUE(keys(plain).empty());
  EXPECT_EQ(keys(tracked), (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                                     "num_batches_tracked"}));
  EXPECT_EQ(group.to_string(), "GroupNorm(2, 4, eps=1e-05, affine=True)");
  const Tensor x = testing::random_for({2, 4, 3, 3, 2}, DType::Float32, 9);
  EXPECT_TRUE(all_equal(group.forward(x), group_norm(x, 2, group.weight, group.bias)));
  const Tensor y = testing::random_for({5, 3, 2}, DType::Float32, 10);
  EXPECT_TRUE(all_equal(layer.forward(y), layer_norm(y, {3, 2}, layer.weight, layer.bias)));
  EXPECT_TRUE(all_equal(plain.forward(x), instance_norm(x)));
  // Tracked: training moves the running statistics, eval normalises with them.
  tracked.forward(x);
  EXPECT_FALSE(all_equal(tracked.running_mean, zeros({4})));
  EXPECT_EQ(tracked.num_batches_tracked.item<int64_t>(), 0);
  tracked.eval();
  const Tensor before = tracked.running_mean.clone();
  EXPECT_TRUE(
      all_equal(tracked.forward(x), instance_norm(x, tracked.running_mean, tracked.running_var,
                                                  tracked.weight, tracked.bias, /*use_input_stats=*/false)));
  EXPECT_TRUE(all_equal(tracked.running_mean, before));
  EXPECT_KILN_ERROR(nn::GroupNorm({.num_groups = 3, .num_channels = 4}), "GroupNorm", "do not split");
  EXPECT_KILN_ERROR(tracked.forward(zeros({2, 4, 3})), "InstanceNorm3d", "expected [N, 4, 3 spatial dims]");
  EXPECT_KILN_ERROR(nn::LayerNorm({}), "LayerNorm", "normalized_shape is empty");
}

TEST(NnFlatten, FlattensTheChosenDims) {
  const Tensor x = random_uniform({2, 3, 4, 5}, -1, 1, DType::Float32, 5);
  EXPECT_EQ(nn::Flatten().forward(x).sizes(), (std::vector<int64_t>{2, 60}));
  EXPECT_EQ(nn::Flatten(nn::FlattenOptions{.start_dim = 0, .end_dim = 1}).forward(x).sizes(),
            (std::vector<int64_t>{6, 4, 5}));
  EXPECT_TRUE(all_equal(nn::Flatten().forward(x), x.reshape({2, 60})));
  EXPECT_TRUE(nn::Identity().forward(x).is_same(x));
}

TEST(NnSequential, ChainsLayersInOrder) {
  manual_seed(4);
  auto first = std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 3, .out_features = 5});
  auto second = std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 5, .out_features = 2});
  nn::Sequential seq{first, std::make_shared<nn::ReLU>()};
  seq.push_back("out", second);
  ASSERT_EQ(seq.size(), 3u);
  EXPECT_TRUE(seq[2] == second);
  const Tensor x = random_uniform({4, 3}, -1, 1, DType::Float32, 6);
  EXPECT_TRUE(all_equal(seq.forward(x), second->forward(relu(first->forward(x)))));
  EXPECT_EQ(seq.named_parameters()[2].first, "out.weight");
  EXPECT_KILN_ERROR(seq[3], "Sequential", "index 3");
  EXPECT_TRUE(all_equal(nn::Sequential().forward(x), x));
  size_t visited = 0;
  for (const auto& layer : seq) visited += layer != nullptr;
  EXPECT_EQ(visited, 3u);
}

TEST(NnModuleList, IndexesIteratesAndCastsWithACheck) {
  nn::ModuleList list{std::make_shared<nn::ReLU>(), std::make_shared<nn::Tanh>()};
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1]->type_name(), "Tanh");
  EXPECT_NE(list.at<nn::ReLU>(0), nullptr);
  EXPECT_KILN_ERROR(list.at<nn::Linear>(0), "ModuleList", "entry 0", "ReLU");
  std::vector<std::string> names;
  for (const auto& m : list) names.push_back(m->type_name());
  EXPECT_EQ(names, (std::vector<std::string>{"ReLU", "Tanh"}));
}

TEST(NnLoss, ModulesMatchTheFunctionalLossesAndHoldWeightsAsBuffers) {
  const Tensor logits = random_uniform({4, 3}, -2, 2, DType::Float32, 7);
  const Tensor labels = tensor<int64_t>({0, 2, 1, 2});
  const Tensor weight = tensor<float>({0.5, 2.0, 1.0});
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions{.weight = weight, .label_smoothing = 0.1});
  EXPECT_TRUE(all_equal(ce(logits, labels),
                        cross_entropy(logits, labels, {.weight = weight, .label_smoothing = 0.1})));
  ASSERT_EQ(ce.state_dict().size(), 1u);
  EXPECT_EQ(ce.state_dict()[0].first, "weight");
  nn::NLLLoss nll(nn::NLLLossOptions{.weight = weight, .ignore_index = 1});
  const Tensor logp = log_softmax(logits, 1);
  EXPECT_TRUE(all_equal(nll(logp, labels), nll_loss(logp, labels, {.weight = weight, .ignore_index = 1})));

  const Tensor targets = random_uniform({4, 3}, 0, 1, DType::Float32, 8);
  nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions{.pos_weight = weight});
  EXPECT_TRUE(all_equal(bce(logits, targets),
                        binary_cross_entropy_with_logits(logits, targets, {.pos_weight = weight})));
  EXPECT_EQ(bce.named_buffers()[0].first, "pos_weight");
  // The buffers move with the module: the loss then takes float64 inputs.
  bce.to(DType::Float64);
  EXPECT_EQ(bce.buffers()[0].dtype(), DType::Float64);
  EXPECT_EQ(bce(logits.to(DType::Float64), targets.to(DType::Float64)).dtype(), DType::Float64);

  nn::MSELoss mse(nn::MSELossOptions{.reduction = Reduction::Sum});
  nn::L1Loss l1;
  nn::SmoothL1Loss smooth(nn::SmoothL1LossOptions{.beta = 0.5});
  EXPECT_TRUE(all_equal(mse(logits, targets), mse_loss(logits, targets, Reduction::Sum)));
  EXPECT_TRUE(all_equal(l1(logits, targets), l1_loss(logits, targets)));
  EXPECT_TRUE(all_equal(smooth(logits, targets), smooth_l1_loss(logits, targets, Reduction::Mean, 0.5)));
  // Note [Loss shapes]: no broadcasting between prediction and target.
  const Tensor column = zeros({4, 1}), row = zeros({4});
  EXPECT_KILN_ERROR(mse(column, row), "mse_loss", "[4, 1]", "[4]");
  EXPECT_KILN_ERROR(l1(column, row), "l1_loss", "[4, 1]", "[4]");
  EXPECT_KILN_ERROR(smooth(column, row), "smooth_l1_loss", "[4, 1]", "[4]");
  EXPECT_TRUE(nn::CrossEntropyLoss().state_dict().empty());
}

TEST(NnLoss, SegmentationLossModulesMatchTheFunctionsAndCheckTheirWeightsWhenBuilt) {
  const Tensor logits = random_uniform({2, 3, 4, 4}, -2, 2, DType::Float32, 9);
  const Tensor labels = tensor<int64_t>(std::vector<int64_t>(32, 2), {2, 1, 4, 4});
  const Tensor weight = tensor<float>({0.5, 2.0, 1.0});
  nn::DiceLoss dice(nn::DiceLossOptions{.to_onehot_y = true, .softmax = true, .weight = weight});
  EXPECT_TRUE(all_equal(dice(logits, labels),
                        dice_loss(logits, labels, {.to_onehot_y = true, .softmax = true, .weight = weight})));
  EXPECT_EQ(dice.named_buffers()[0].first, "weight");
  nn::FocalLoss focal(nn::FocalLossOptions{.to_onehot_y = true, .alpha_per_class = weight.clone(), .weight = weight});
  EXPECT_TRUE(all_equal(
      focal(logits, labels),
      focal_loss(logits, labels, {.to_onehot_y = true, .alpha_per_class = weight, .weight = weight})));
  EXPECT_EQ(focal.named_buffers().size(), 2u);
  nn::DiceCELoss dice_ce(
      nn::DiceCELossOptions{.dice = {.to_onehot_y = true, .softmax = true}, .lambda_ce = 0.5});
  EXPECT_TRUE(all_equal(
      dice_ce(logits, labels),
      dice_ce_loss(logits, labels, {.dice = {.to_onehot_y = true, .softmax = true}, .lambda_ce = 0.5})));
  nn::DiceFocalLoss dice_focal(nn::DiceFocalLossOptions{.dice = {.to_onehot_y = true, .softmax = true}});
  EXPECT_TRUE(all_equal(dice_focal(logits, labels),
                        dice_focal_loss(logits, labels, {.dice = {.to_onehot_y = true, .softmax = true}})));
  // the weights move with the module, and bad values are caught when it is built
  dice.to(DType::Float64);
  EXPECT_EQ(dice(logits.to(DType::Float64), labels).dtype(), DType::Float64);
  const Tensor negative = tensor<float>({1.0, -0.5, 1.0});
  EXPECT_KILN_ERROR(nn::DiceLoss(nn::DiceLossOptions{.weight = negative}), "DiceLoss", "non-negative",
                    "-0.5");
  EXPECT_KILN_ERROR(nn::FocalLoss(nn::FocalLossOptions{.alpha_per_class = negative}), "FocalLoss",
                    "alpha_per_class");
  EXPECT_KILN_ERROR(nn::DiceCELoss(nn::DiceCELossOptions{.dice = {.weight = full({3}, NAN)}}), "DiceCELoss",
                    "finite");
}

}  // namespace
}  // namespace kiln
