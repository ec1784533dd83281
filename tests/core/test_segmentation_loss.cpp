// dice_loss, focal_loss, dice_ce_loss, dice_focal_loss and one_hot
// (core/ops/segmentation_loss.h): losses and input gradients equal MONAI's (tests/core/
// segmentation_loss/make_fixtures.py, monai 1.6.1), float32 beside float64, float64
// gradient checks, layouts, autocast, the one-channel warnings and bad arguments.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/warning.h"
#include "data/npz.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::gradcheck;
using Inputs = std::vector<Tensor>;
using LossFn = std::function<Tensor(const Tensor& input, const Tensor& target)>;

const data::npz::File& fixture() {
  static const data::npz::File file(std::string(KILN_SOURCE_DIR) +
                                    "/tests/core/segmentation_loss/segmentation_loss.npz");
  return file;
}

Tensor f64(std::vector<double> values) {
  return tensor<double>(values, {static_cast<int64_t>(values.size())});
}

// The Kiln loss of each MONAI case in make_fixtures.py's CASES, with the same arguments.
const std::map<std::string, LossFn>& cases() {
  static const std::map<std::string, LossFn> all = {
      {"dice_probabilities", [](const Tensor& x, const Tensor& y) { return dice_loss(x, y); }},
      {"dice_softmax_labels",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y, {.to_onehot_y = true, .softmax = true});
       }},
      {"dice_sigmoid_no_background",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y, {.include_background = false, .sigmoid = true});
       }},
      {"dice_squared_jaccard",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y, {.softmax = true, .squared_pred = true, .jaccard = true});
       }},
      {"dice_batch_sum",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y,
                          {.to_onehot_y = true, .softmax = true, .reduction = Reduction::Sum, .batch = true});
       }},
      {"dice_none_weighted",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y,
                          {.to_onehot_y = true,
                           .softmax = true,
                           .reduction = Reduction::None,
                           .weight = f64({1.0, 2.0, 3.0})});
       }},
      {"dice_none_batch_scalar_weight",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y,
                          {.include_background = false,
                           .softmax = true,
                           .reduction = Reduction::None,
                           .batch = true,
                           .weight = scalar_tensor(0.5, {.dtype = DType::Float64})});
       }},
      {"dice_soft_label",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y, {.sigmoid = true, .soft_label = true});
       }},
      {"dice_soft_label_squared",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y, {.softmax = true, .squared_pred = true, .jaccard = true, .soft_label = true});
       }},
      {"dice_smoothing_weight_no_background",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y,
                          {.include_background = false,
                           .to_onehot_y = true,
                           .softmax = true,
                           .smooth_nr = 0.0,
                           .smooth_dr = 1e-3,
                           .weight = f64({2.0, 1.0})});
       }},
      {"dice_ignore_sentinel",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y, {.to_onehot_y = true, .softmax = true, .ignore_index = 255});
       }},
      {"dice_ignore_class",
       [](const Tensor& x, const Tensor& y) {
         return dice_loss(x, y, {.to_onehot_y = true, .softmax = true, .ignore_index = 1});
       }},
      {"dice_one_channel",
       [](const Tensor& x, const Tensor& y) { return dice_loss(x, y, {.sigmoid = true}); }},
      {"focal_one_hot", [](const Tensor& x, const Tensor& y) { return focal_loss(x, y); }},
      {"focal_softmax_alpha",
       [](const Tensor& x, const Tensor& y) {
         return focal_loss(x, y, {.to_onehot_y = true, .alpha = 0.25, .use_softmax = true});
       }},
      {"focal_alpha_per_class_weight_sum",
       [](const Tensor& x, const Tensor& y) {
         return focal_loss(x, y,
                           {.gamma = 1.5,
                            .alpha_per_class = tensor<float>({0.2F, 0.5F, 0.8F}, {3}),
                            .weight = tensor<float>({1.0F, 2.0F, 3.0F}, {3}),
                            .reduction = Reduction::Sum});
       }},
      {"focal_softmax_no_background_none",
       [](const Tensor& x, const Tensor& y) {
         return focal_loss(x, y,
                           {.include_background = false,
                            .to_onehot_y = true,
                            .alpha = 0.25,
                            .weight = scalar_tensor(2.0, {.dtype = DType::Float32}),
                            .reduction = Reduction::None,
                            .use_softmax = true});
       }},
      {"focal_ignore_sum",
       [](const Tensor& x, const Tensor& y) {
         return focal_loss(x, y, {.to_onehot_y = true, .reduction = Reduction::Sum, .ignore_index = 255});
       }},
      {"focal_ignore_mean",
       [](const Tensor& x, const Tensor& y) {
         return focal_loss(x, y,
                           {.to_onehot_y = true, .gamma = 0.0, .use_softmax = true, .ignore_index = 255});
       }},
      {"dice_ce_labels",
       [](const Tensor& x, const Tensor& y) {
         return dice_ce_loss(x, y, {.dice = {.to_onehot_y = true, .softmax = true}});
       }},
      {"dice_ce_weight_no_background_smoothing",
       [](const Tensor& x, const Tensor& y) {
         return dice_ce_loss(x, y,
                             {.dice = {.include_background = false,
                                       .to_onehot_y = true,
                                       .softmax = true,
                                       .reduction = Reduction::Sum,
                                       .weight = f64({1.0, 2.0, 3.0})},
                              .lambda_dice = 0.7,
                              .lambda_ce = 1.3,
                              .label_smoothing = 0.1});
       }},
      {"dice_ce_one_hot",
       [](const Tensor& x, const Tensor& y) {
         return dice_ce_loss(x, y, {.dice = {.softmax = true, .batch = true}});
       }},
      {"dice_ce_one_channel",
       [](const Tensor& x, const Tensor& y) {
         return dice_ce_loss(x, y, {.dice = {.sigmoid = true, .weight = f64({2.0})}});
       }},
      {"dice_focal_labels",
       [](const Tensor& x, const Tensor& y) {
         return dice_focal_loss(x, y, {.dice = {.to_onehot_y = true, .softmax = true}});
       }},
      {"dice_focal_no_background_weight",
       [](const Tensor& x, const Tensor& y) {
         return dice_focal_loss(x, y,
                                {.dice = {.include_background = false,
                                          .sigmoid = true,
                                          .weight = tensor<float>({1.0F, 2.0F}, {2})},
                                 .gamma = 1.0,
                                 .lambda_dice = 0.5,
                                 .lambda_focal = 2.0,
                                 .alpha = 0.25});
       }},
  };
  return all;
}

// float64 cases agree to rounding; the float32 ones (MONAI's focal losses compute in
// float32) to float32's.
testing::Tolerance tolerance_of(const Tensor& t) {
  return t.dtype() == DType::Float64 ? testing::Tolerance{1e-12, 1e-10} : testing::Tolerance{1e-6, 2e-5};
}

void check_against_monai(const std::string& name, const LossFn& loss_fn) {
  SCOPED_TRACE(name);
  const data::npz::File& f = fixture();
  const Tensor x = f.load(name + "_input").requires_grad_(true);
  const Tensor loss = loss_fn(x, f.load(name + "_target"));
  const Tensor expected = f.load(name + "_loss");
  EXPECT_EQ(loss.sizes(), expected.sizes());
  EXPECT_TRUE(testing::all_close(loss, expected, tolerance_of(expected)));
  mul(loss, f.load(name + "_weights_out")).sum().backward();
  EXPECT_TRUE(testing::all_close(x.grad(), f.load(name + "_grad_input"), tolerance_of(expected)));
}

TEST(SegmentationLoss, LossesAndGradientsEqualMonais) {
  WarningSink quiet = set_warning_sink([](const std::string&) {});
  size_t fixture_cases = 0;
  for (const data::npz::Array& array : fixture().arrays())
    fixture_cases += array.key.ends_with("_loss") ? 1 : 0;
  EXPECT_EQ(fixture_cases, cases().size()) << "make_fixtures.py and this test list different cases";
  for (const auto& [name, loss_fn] : cases()) check_against_monai(name, loss_fn);
  set_warning_sink(quiet);
}

// float32 runs of the float64 cases agree with MONAI's float64 numbers to float32's
// rounding: nothing in the losses loses more than a few ulps.
TEST(SegmentationLoss, Float32AgreesWithTheFloat64Fixtures) {
  for (const std::string name : {"dice_softmax_labels", "dice_squared_jaccard", "dice_ce_labels",
                                 "dice_ce_weight_no_background_smoothing", "dice_ignore_sentinel"}) {
    SCOPED_TRACE(name);
    const data::npz::File& f = fixture();
    const Tensor x = f.load(name + "_input").to(DType::Float32).requires_grad_(true);
    LossFn loss_fn = cases().at(name);
    Tensor loss;
    if (name.starts_with("dice_ce_weight")) {  // the weight must have the input's dtype
      loss = dice_ce_loss(x, f.load(name + "_target").to(DType::Float32),
                          {.dice = {.include_background = false,
                                    .to_onehot_y = true,
                                    .softmax = true,
                                    .reduction = Reduction::Sum,
                                    .weight = tensor<float>({1.0F, 2.0F, 3.0F}, {3})},
                           .lambda_dice = 0.7,
                           .lambda_ce = 1.3,
                           .label_smoothing = 0.1});
    } else {
      loss = loss_fn(x, f.load(name + "_target").to(DType::Float32));
    }
    EXPECT_EQ(loss.dtype(), DType::Float32);
    EXPECT_TRUE(testing::all_close(loss, f.load(name + "_loss").to(DType::Float32), {1e-6, 1e-5}));
    mul(loss, f.load(name + "_weights_out").to(DType::Float32)).sum().backward();
    EXPECT_TRUE(testing::all_close(x.grad(), f.load(name + "_grad_input").to(DType::Float32), {1e-6, 1e-4}));
  }
}

// A perfect prediction has no loss (up to the smoothing terms), a wrong one nearly 1.
TEST(SegmentationLoss, PerfectAndWrongPredictions) {
  const Tensor labels = tensor<int64_t>({0, 1, 2, 2, 1, 0, 0, 1}, {1, 1, 2, 4});
  const Tensor truth = one_hot(labels, 3, DType::Float64);
  EXPECT_NEAR(dice_loss(truth, labels, {.to_onehot_y = true}).item<double>(), 0.0, 1e-9);
  EXPECT_NEAR(dice_loss(truth, labels, {.to_onehot_y = true, .jaccard = true}).item<double>(), 0.0, 1e-9);
  const Tensor wrong = one_hot(tensor<int64_t>({1, 2, 0, 0, 2, 1, 1, 2}, {1, 1, 2, 4}), 3, DType::Float64);
  EXPECT_NEAR(dice_loss(wrong, labels, {.to_onehot_y = true}).item<double>(), 1.0, 1e-5);
  // a confident correct logit map has a focal loss far below a confident wrong one's
  const Tensor logits = mul(sub(mul(truth, 2.0), 1.0), 8.0);
  EXPECT_LT(focal_loss(logits, truth).item<double>(), 1e-9);
  EXPECT_GT(focal_loss(neg(logits), truth).item<double>(), 1.0);
}

TEST(SegmentationLoss, OneHotEncodesLabelMapsOfAnyDtype) {
  const Tensor labels = tensor<int64_t>({2, 0, 1, 1, 0, 2}, {2, 1, 3});
  const Tensor expected = tensor<float>({0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1}, {2, 3, 3});
  EXPECT_TRUE(testing::all_equal(one_hot(labels, 3, DType::Float32), expected));
  EXPECT_TRUE(testing::all_equal(one_hot(labels.to(DType::Float32), 3, DType::Float32), expected));
  EXPECT_TRUE(testing::all_equal(one_hot(labels.to(DType::UInt8), 3, DType::Float32), expected));
  EXPECT_TRUE(
      testing::all_equal(one_hot(transpose(labels.reshape({2, 3, 1}), 1, 2), 3, DType::Float32), expected));
}

// The losses read strided views as they read contiguous tensors: a channels-last or
// transposed input gives the same loss and gradient.
TEST(SegmentationLoss, StridedInputsGiveTheSameLoss) {
  const Tensor base = testing::random_for({2, 3, 4, 3, 5}, DType::Float64, 11);
  Generator generator(12);
  const Tensor labels = randint(0, 3, {2, 1, 4, 3, 5}, {}, &generator);
  const Tensor strided = base.contiguous(MemoryFormat::ChannelsLast3d).requires_grad_(true);
  const Tensor dense = base.clone().requires_grad_(true);
  for (const auto& fn : std::vector<LossFn>{
           [](const Tensor&x, const Tensor&y) {
             return dice_loss(x, y, {.to_onehot_y = true, .softmax = true});
           },
           [](const Tensor&x, const Tensor&y) { return focal_loss(x, y, {.to_onehot_y = true}); },
           [](const Tensor&x, const Tensor&y) {
             return dice_ce_loss(x, y, {.dice = {.to_onehot_y = true, .softmax = true}});
           }}) {
    strided.set_grad({});
    dense.set_grad({});
    const Tensor a = fn(strided, labels), b = fn(dense, labels);
    EXPECT_TRUE(testing::all_close(a, b, {1e-14, 1e-12}));
    a.backward();
    b.backward();
    EXPECT_TRUE(testing::all_close(strided.grad(), dense.grad(), {1e-14, 1e-12}));
  }
}

TEST(SegmentationLoss, AutocastComputesInFloat32) {
  const Tensor logits = testing::random_for({2, 3, 4, 4}, DType::Float32, 5);
  Generator generator(6);
  const Tensor labels = randint(0, 3, {2, 1, 4, 4}, {}, &generator);
  const Tensor low = logits.to(DType::BFloat16);
  AutocastGuard autocast(DType::BFloat16);
  const Tensor a = dice_ce_loss(low, labels, {.dice = {.to_onehot_y = true, .softmax = true}});
  const Tensor b =
      dice_ce_loss(low.to(DType::Float32), labels, {.dice = {.to_onehot_y = true, .softmax = true}});
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_TRUE(testing::all_equal(a, b));
  EXPECT_EQ(focal_loss(low, labels, {.to_onehot_y = true}).dtype(), DType::Float32);
}

TEST(SegmentationLoss, OneChannelOptionsWarnAsMonaiDoes) {
  std::vector<std::string> lines;
  WarningSink previous = set_warning_sink([&](const std::string& line) { lines.push_back(line); });
  const Tensor x = testing::random_for({2, 1, 3, 3}, DType::Float64, 2);
  const Tensor y = gt(testing::random_for({2, 1, 3, 3}, DType::Float64, 3), 0.0).to(DType::Float64);
  // softmax and to_onehot_y are ignored on one channel: the loss is the plain one's
  EXPECT_TRUE(testing::all_equal(dice_loss(x, y, {.to_onehot_y = true, .softmax = true}), dice_loss(x, y)));
  set_warning_sink(previous);
  ASSERT_GE(lines.size(), 1U);
  bool named = false;
  for (const std::string& line : lines)
    named = named || line.find("single-channel prediction") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(SegmentationLoss, BadArgumentsAreErrors) {
  const Tensor x = testing::random_for({2, 3, 4, 4}, DType::Float32, 1);
  const Tensor labels = tensor<int64_t>(std::vector<int64_t>(32, 1), {2, 1, 4, 4});
  EXPECT_KILN_ERROR(dice_loss(x, full({2, 1, 4, 4}, 3.0), {.to_onehot_y = true}), "dice_loss", "label 3",
                    "outside the 3 classes");
  EXPECT_KILN_ERROR(dice_loss(x, full({2, 1, 4, 4}, -1.0), {.to_onehot_y = true}), "dice_loss", "label -1");
  EXPECT_KILN_ERROR(focal_loss(x, full({2, 1, 4, 4}, 7), {.to_onehot_y = true}), "focal_loss", "label 7");
  EXPECT_KILN_ERROR(dice_loss(x, labels), "dice_loss", "does not match", "needs to_onehot_y");
  EXPECT_KILN_ERROR(dice_loss(x, zeros({2, 3, 4})), "dice_loss", "different ranks");
  EXPECT_KILN_ERROR(dice_loss(zeros({2, 3}), zeros({2, 3})), "dice_loss", "at least one spatial dim");
  EXPECT_KILN_ERROR(dice_loss(labels, labels), "dice_loss", "floating-point");
  EXPECT_KILN_ERROR(dice_loss(x, labels, {.sigmoid = true, .softmax = true}), "dice_loss", "exclusive");
  EXPECT_KILN_ERROR(dice_loss(x, labels, {.to_onehot_y = true, .weight = tensor<float>({1, -1, 1}, {3})}),
                    "dice_loss", "weight values must be finite and non-negative", "-1");
  EXPECT_KILN_ERROR(dice_loss(x, labels, {.to_onehot_y = true, .weight = ones({2})}), "dice_loss",
                    "weight must be 0-d or have shape [3]");
  EXPECT_KILN_ERROR(focal_loss(x, labels, {.to_onehot_y = true, .gamma = -1}), "focal_loss", "gamma");
  EXPECT_KILN_ERROR(focal_loss(x, labels, {.to_onehot_y = true, .alpha = 0.5, .alpha_per_class = ones({3})}),
                    "focal_loss", "not both");
  EXPECT_KILN_ERROR(focal_loss(x, labels, {.to_onehot_y = true, .alpha_per_class = ones({})}), "focal_loss",
                    "alpha_per_class must be [3]");
  EXPECT_KILN_ERROR(focal_loss(narrow(x, 1, 0, 1), narrow(x, 1, 0, 1), {.weight = ones({1})}), "focal_loss",
                    "per-class weight needs more than one channel");
  EXPECT_KILN_ERROR(dice_ce_loss(x, labels, {.dice = {.to_onehot_y = true, .reduction = Reduction::None}}),
                    "dice_ce_loss", "Mean or Sum");
  EXPECT_KILN_ERROR(dice_ce_loss(x, zeros({2, 2, 4, 4}), {.dice = {.to_onehot_y = true}}), "dice_ce_loss",
                    "neither 1");
  EXPECT_KILN_ERROR(dice_ce_loss(x, labels, {.dice = {.to_onehot_y = true, .ignore_index = 0}}),
                    "dice_ce_loss", "ignore_index is not supported");
  EXPECT_KILN_ERROR(dice_ce_loss(x, labels, {.dice = {.to_onehot_y = true}, .lambda_ce = -1}), "dice_ce_loss",
                    "lambda_ce");
  EXPECT_KILN_ERROR(dice_focal_loss(x, labels, {.dice = {.to_onehot_y = true}, .lambda_focal = -0.5}),
                    "dice_focal_loss", "lambda_focal");
  EXPECT_KILN_ERROR(one_hot(zeros({2, 2, 3}), 3, DType::Float32), "one_hot", "[B, 1, d...]");
  EXPECT_KILN_ERROR(one_hot(zeros({2, 1, 3}), 0, DType::Float32), "one_hot", "must be positive");
}

// Gradient checks (float64), over the options that change the formula.
Tensor random_labels(uint64_t seed) {
  Generator generator(seed);
  return randint(0, 3, {2, 1, 3, 2, 3}, {}, &generator);
}

KILN_GRADCHECK_TEST(dice_loss) {
  const Tensor x = testing::random_for({2, 3, 3, 2, 3}, DType::Float64, 21).requires_grad_(true);
  const Tensor labels = random_labels(22);
  const Tensor soft = softmax(testing::random_for({2, 3, 3, 2, 3}, DType::Float64, 23), 1);
  for (const DiceLossOptions& o : std::vector<DiceLossOptions>{
           {.to_onehot_y = true, .softmax = true},
           {.include_background = false,
           .to_onehot_y = true,
           .sigmoid = true,
           .jaccard = true,
           .batch = true},
           {.to_onehot_y = true, .softmax = true, .squared_pred = true, .reduction = Reduction::None},
           {.to_onehot_y = true, .softmax = true, .weight = f64({0.5, 1.0, 2.0}), .ignore_index = 2}}) {
    EXPECT_TRUE(gradcheck([&](const Inputs& v) { return dice_loss(v[0], labels, o); }, {x}));
  }
  EXPECT_TRUE(gradcheck(
      [&](const Inputs& v) { return dice_loss(v[0], soft, {.softmax = true, .soft_label = true}); }, {x}));
}

KILN_GRADCHECK_TEST(focal_loss) {
  const Tensor x = testing::random_for({2, 3, 3, 2, 3}, DType::Float64, 31).requires_grad_(true);
  const Tensor labels = random_labels(32);
  for (const FocalLossOptions& o : std::vector<FocalLossOptions>{
           {.to_onehot_y = true},
           {.to_onehot_y = true, .gamma = 1.5, .alpha = 0.25, .reduction = Reduction::Sum},
           {.to_onehot_y = true, .alpha_per_class = f64({0.2, 0.5, 0.8}), .use_softmax = true},
           {.include_background = false,
           .to_onehot_y = true,
           .weight = f64({1.0, 3.0}),
           .ignore_index = 0}}) {
    EXPECT_TRUE(gradcheck([&](const Inputs& v) { return focal_loss(v[0], labels, o); }, {x}));
  }
}

KILN_GRADCHECK_TEST(dice_ce_loss) {
  const Tensor x = testing::random_for({2, 3, 3, 2, 3}, DType::Float64, 41).requires_grad_(true);
  const Tensor labels = random_labels(42);
  EXPECT_TRUE(gradcheck(
      [&](const Inputs& v) {
        return dice_ce_loss(v[0], labels,
                            {.dice = {.include_background = false,
                                      .to_onehot_y = true,
                                      .softmax = true,
                                      .weight = f64({1.0, 2.0, 0.5})},
                             .label_smoothing = 0.2});
      },
      {x}));
  const Tensor x1 = narrow(x, 1, 0, 1).detach().requires_grad_(true);
  const Tensor binary = gt(labels, 0).to(DType::Float64);
  EXPECT_TRUE(gradcheck(
      [&](const Inputs& v) {
        return dice_ce_loss(v[0], binary, {.dice = {.sigmoid = true, .weight = f64({3.0})}});
      },
      {x1}));
}

KILN_GRADCHECK_TEST(dice_focal_loss) {
  const Tensor x = testing::random_for({2, 3, 3, 2, 3}, DType::Float64, 51).requires_grad_(true);
  const Tensor labels = random_labels(52);
  EXPECT_TRUE(gradcheck(
      [&](const Inputs& v) {
        return dice_focal_loss(v[0], labels, {.dice = {.to_onehot_y = true, .softmax = true}, .alpha = 0.3});
      },
      {x}));
}

}  // namespace
}  // namespace kiln
