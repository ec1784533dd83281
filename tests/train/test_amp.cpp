// Apex opt levels (train/amp.h): parsing and names, the table of properties against
// Apex's documented table, the model casts of each level on a small conv + batch-norm +
// linear model (dtypes, identity, values, a forward and backward that run), the input
// and output casts, and the errors. amp_initialize and training under each level are in
// test_amp_training.cpp.
#include <gtest/gtest.h>

#include <memory>

#include "core/ops.h"
#include "nn/nn.h"
#include "tests/test_util.h"
#include "train/amp.h"

namespace kiln {
namespace {

using testing::all_equal;
using testing::random_nonzero;
using train::AmpProperties;
using train::OptLevel;

TEST(Amp, ParsesAndNamesOptLevels) {
  EXPECT_EQ(train::parse_opt_level("O0"), OptLevel::O0);
  EXPECT_EQ(train::parse_opt_level("O1"), OptLevel::O1);
  EXPECT_EQ(train::parse_opt_level("O2"), OptLevel::O2);
  EXPECT_EQ(train::parse_opt_level("O3"), OptLevel::O3);
  EXPECT_EQ(train::parse_opt_level("o2"), OptLevel::O2);
  for (OptLevel level : {OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3}) {
    EXPECT_EQ(train::parse_opt_level(train::name(level)), level);
  }
  EXPECT_STREQ(train::name(OptLevel::O3), "O3");
}

TEST(Amp, RejectsUnknownOptLevels) {
  EXPECT_KILN_ERROR(train::parse_opt_level("O4"), "unknown opt level \"O4\"", "O0, O1, O2, O3");
  EXPECT_KILN_ERROR(train::parse_opt_level(""), "unknown opt level", "O0, O1, O2, O3");
  EXPECT_KILN_ERROR(train::parse_opt_level("O12"), "\"O12\"");
  EXPECT_KILN_ERROR(train::parse_opt_level("01"), "\"01\"", "letter O, not the digit zero");
}

// Apex's table (apex/amp/frontend.py, O0-O3), written out independently.
struct Row {
  OptLevel level;
  bool autocast, cast_model, keep_bn_fp32, masters, dynamic;
  double scale;
};

TEST(Amp, PropertiesFollowApexTable) {
  const Row rows[] = {
      {OptLevel::O0, false, false, true, false, false, 1.0},
      {OptLevel::O1, true, false, true, false, true, 1.0},
      {OptLevel::O2, false, true, true, true, true, 1.0},
      {OptLevel::O3, false, true, false, false, false, 1.0},
  };
  for (DType low : {DType::Float16, DType::BFloat16}) {
    for (const Row& row : rows) {
      SCOPED_TRACE(train::name(row.level));
      const AmpProperties p = train::amp_properties(row.level, low);
      EXPECT_EQ(p.level, row.level);
      EXPECT_EQ(p.low_dtype, low);
      EXPECT_EQ(p.enabled_autocast, row.autocast);
      EXPECT_EQ(p.cast_model, row.cast_model);
      if (p.cast_model) {
        EXPECT_EQ(p.keep_batchnorm_fp32, row.keep_bn_fp32);
      }
      EXPECT_EQ(p.master_weights, row.masters);
      EXPECT_EQ(p.dynamic_loss_scale, row.dynamic);
      if (!p.dynamic_loss_scale) {
        EXPECT_EQ(p.static_loss_scale, row.scale);
      }
    }
  }
  EXPECT_EQ(train::amp_properties(OptLevel::O1).low_dtype, DType::Float16);
  EXPECT_KILN_ERROR(train::amp_properties(OptLevel::O2, DType::Float32), "amp", "float16 or bfloat16", "float32");
}

struct SmallNet {
  std::shared_ptr<nn::Conv3d> conv =
      std::make_shared<nn::Conv3d>(nn::Conv3dOptions{.in_channels = 2, .out_channels = 3, .kernel_size = {3}});
  std::shared_ptr<nn::BatchNorm3d> bn = std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = 3});
  std::shared_ptr<nn::Linear> fc = std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 3, .out_features = 2});
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      conv, bn, std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(), fc});
};

TEST(Amp, CastModelLeavesO0AndO1Float32) {
  for (OptLevel level : {OptLevel::O0, OptLevel::O1}) {
    SmallNet net;
    const Tensor before = net.conv->weight.detach().clone();
    train::amp_cast_model(*net.model, train::amp_properties(level));
    for (const auto& [name, p] : net.model->named_parameters()) EXPECT_EQ(p.dtype(), DType::Float32) << name;
    EXPECT_TRUE(all_equal(net.conv->weight.detach(), before));
  }
}

TEST(Amp, CastModelO2KeepsBatchNormFloat32) {
  for (DType low : {DType::Float16, DType::BFloat16}) {
    SmallNet net;
    const Tensor conv_weight = net.conv->weight;  // a handle, as an optimizer holds
    const Tensor expected = conv_weight.detach().to(low);
    train::amp_cast_model(*net.model, train::amp_properties(OptLevel::O2, low));
    EXPECT_TRUE(conv_weight.is_same(net.conv->weight));
    EXPECT_TRUE(all_equal(conv_weight.detach(), expected));
    EXPECT_EQ(net.conv->bias.dtype(), low);
    EXPECT_EQ(net.fc->weight.dtype(), low);
    EXPECT_EQ(net.fc->bias.dtype(), low);
    EXPECT_EQ(net.bn->weight.dtype(), DType::Float32);
    EXPECT_EQ(net.bn->bias.dtype(), DType::Float32);
    EXPECT_EQ(net.bn->running_mean.dtype(), DType::Float32);
    EXPECT_EQ(net.bn->running_var.dtype(), DType::Float32);
    EXPECT_EQ(net.bn->num_batches_tracked.dtype(), DType::Int64);
    EXPECT_TRUE(net.conv->weight.requires_grad());

    // The model runs in the low dtype end to end, batch norm on float32 statistics.
    const AmpProperties amp = train::amp_properties(OptLevel::O2, low);
    const Tensor x = train::amp_cast_input(amp, random_nonzero({2, 2, 3, 3, 3}, DType::Float32, 1));
    const Tensor y = net.model->forward(x);
    EXPECT_EQ(y.dtype(), low);
    sum(y).backward();
    EXPECT_EQ(net.conv->weight.grad().dtype(), low);
    EXPECT_EQ(net.bn->weight.grad().dtype(), DType::Float32);
  }
}

TEST(Amp, O1ModelRunsUnderAutocastWithFloat32Gradients) {
  for (DType low : {DType::Float16, DType::BFloat16}) {
    SmallNet net;
    const AmpProperties amp = train::amp_properties(OptLevel::O1, low);
    train::amp_cast_model(*net.model, amp);
    const Tensor x = train::amp_cast_input(amp, random_nonzero({2, 2, 3, 3, 3}, DType::Float32, 1));
    EXPECT_EQ(x.dtype(), DType::Float32);
    AutocastGuard autocast(amp.low_dtype, amp.enabled_autocast);
    const Tensor logits = net.model->forward(x);
    EXPECT_EQ(logits.dtype(), low);
    const Tensor loss = cross_entropy(logits, tensor<int64_t>({1, 0}, {2}));
    EXPECT_EQ(loss.dtype(), DType::Float32);
    loss.backward();
    for (const auto& [name, p] : net.model->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_EQ(p.grad().dtype(), DType::Float32) << name;
    }
  }
}

TEST(Amp, CastModelO3CastsEverythingButIntegers) {
  SmallNet net;
  const AmpProperties amp = train::amp_properties(OptLevel::O3);
  train::amp_cast_model(*net.model, amp);
  for (const auto& [name, p] : net.model->named_parameters()) EXPECT_EQ(p.dtype(), DType::Float16) << name;
  EXPECT_EQ(net.bn->running_mean.dtype(), DType::Float16);
  EXPECT_EQ(net.bn->num_batches_tracked.dtype(), DType::Int64);
  const Tensor y = net.model->forward(train::amp_cast_input(amp, random_nonzero({2, 2, 3, 3, 3}, DType::Float32, 1)));
  EXPECT_EQ(y.dtype(), DType::Float16);
}

TEST(Amp, CastModelRejectsAModelThatIsNotFloat32) {
  SmallNet net;
  net.model->to(DType::Float64);
  EXPECT_KILN_ERROR(train::amp_cast_model(*net.model, train::amp_properties(OptLevel::O2)), "amp", "parameter",
                    "'0.weight'", "float64", "float32 model", "O2");
}

TEST(Amp, CastInputOnlyForCastModels) {
  const Tensor x = random_nonzero({2, 3}, DType::Float32, 1);
  const Tensor d = random_nonzero({2, 3}, DType::Float64, 2);
  const Tensor labels = tensor<int64_t>({1, 0}, {2});
  for (OptLevel level : {OptLevel::O0, OptLevel::O1}) {
    EXPECT_TRUE(train::amp_cast_input(train::amp_properties(level), x).is_same(x));
  }
  for (OptLevel level : {OptLevel::O2, OptLevel::O3}) {
    const AmpProperties amp = train::amp_properties(level, DType::BFloat16);
    EXPECT_TRUE(all_equal(train::amp_cast_input(amp, x), x.to(DType::BFloat16)));
    EXPECT_EQ(train::amp_cast_input(amp, d).dtype(), DType::BFloat16);
    EXPECT_TRUE(train::amp_cast_input(amp, labels).is_same(labels));
  }
}

// Note [Loss in float32 under O2]: O2/O3 outputs come back as float32, differentiably.
TEST(Amp, CastOutputToFloat32OnlyForCastModels) {
  const Tensor labels = tensor<int64_t>({1, 0}, {2});
  for (DType low : {DType::Float16, DType::BFloat16}) {
    const Tensor y = random_nonzero({2, 3}, low, 1).requires_grad_();
    for (OptLevel level : {OptLevel::O0, OptLevel::O1}) {
      EXPECT_TRUE(train::amp_cast_output(train::amp_properties(level, low), y).is_same(y));
    }
    for (OptLevel level : {OptLevel::O2, OptLevel::O3}) {
      const AmpProperties amp = train::amp_properties(level, low);
      const Tensor out = train::amp_cast_output(amp, y);
      EXPECT_TRUE(all_equal(out, y.detach().to(DType::Float32)));
      sum(out).backward();
      EXPECT_EQ(y.grad().dtype(), low);
      EXPECT_TRUE(all_equal(y.grad(), ones({2, 3}, {.dtype = low})));
      y.set_grad(Tensor());
      const Tensor d = random_nonzero({2, 3}, DType::Float64, 2);
      EXPECT_TRUE(train::amp_cast_output(amp, d).is_same(d));
      EXPECT_TRUE(train::amp_cast_output(amp, labels).is_same(labels));
    }
  }
}

}  // namespace
}  // namespace kiln
