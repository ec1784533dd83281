// The run configuration (train/config.h), the objective (train/objective.h) and the
// schedule (train/schedule.h): JSON both ways with every field, errors naming the source
// and key, the medmnist recipe, validation of values; each loss's outputs, scores and
// pos-weight auto; milestones as fractions; each scheduler stepped at its granularity.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/deferred_check.h"
#include "core/ops.h"
#include "optim/adam.h"
#include "tests/test_util.h"
#include "train/config.h"
#include "train/objective.h"
#include "train/schedule.h"

namespace kiln {
namespace {

using namespace train;

TEST(TrainConfig, EveryFieldRoundTripsThroughJson) {
  TrainConfig config;
  config.model = "densenet121";
  config.milestones = {0.5, 0.75};
  config.batch_size = 7;
  config.lr = 0.25;
  config.pin_memory = false;
  const json::Value saved = to_json(config);
  EXPECT_EQ(saved.as_object().size(), config_fields().size());
  TrainConfig read;
  update_from_json(read, json::parse(json::dump(saved, 2)), "run.json");
  EXPECT_EQ(json::dump(to_json(read)), json::dump(saved));
  std::set<std::string> names;
  for (const ConfigField& field : config_fields()) EXPECT_TRUE(names.insert(field.name).second) << field.name;
}

TEST(TrainConfig, BadJsonNamesTheFileTheKeyAndWhatWasExpected) {
  TrainConfig config;
  EXPECT_KILN_ERROR(update_from_json(config, json::parse("{\"batchsize\": 3}"), "run.json"), "run.json",
                    "unknown setting \"batchsize\"");
  EXPECT_KILN_ERROR(update_from_json(config, json::parse("{\"batch-size\": \"3\"}"), "run.json"),
                    "\"batch-size\" must be an integer", "\"3\"");
  EXPECT_KILN_ERROR(update_from_json(config, json::parse("{\"lr\": true}"), "a.json"),
                    "\"lr\" must be a number");
  EXPECT_KILN_ERROR(update_from_json(config, json::parse("{\"milestones\": [1, \"x\"]}"), "a.json"),
                    "an array of numbers");
  EXPECT_KILN_ERROR(update_from_json(config, json::parse("[1]"), "a.json"), "a JSON object of settings");
  update_from_json(config, json::parse("{\"lr\": 2}"), "a.json");  // an integer is a number
  EXPECT_EQ(config.lr, 2.0);
}

TEST(TrainConfig, TheMedMnistRecipe) {
  TrainConfig config;
  apply_recipe("medmnist", config);
  EXPECT_EQ(config.optimizer, "adam");
  EXPECT_EQ(config.lr, 1e-3);
  EXPECT_EQ(config.batch_size, 32);
  EXPECT_EQ(config.epochs, 100);
  EXPECT_EQ(config.scheduler, "multistep");
  EXPECT_EQ(milestone_epochs(config.milestones, config.epochs), (std::vector<int64_t>{50, 75}));
  EXPECT_EQ(milestone_epochs(config.milestones, 10), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(milestone_epochs({30, 60}, 100), (std::vector<int64_t>{30, 60}));
  EXPECT_EQ(config.monitor, "auc");
  validate(config);
  EXPECT_KILN_ERROR(apply_recipe("imagenet", config), "unknown recipe 'imagenet'", "medmnist");
}

TEST(TrainConfig, ValidationNamesTheSettingAndTheChoices) {
  const auto invalid = [](auto change) {
    TrainConfig config;
    change(config);
    validate(config);
  };
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) { c.optimizer = "lion"; }), "optimizer is one of sgd, adam",
                    "'lion'");
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) { c.amp = "01"; }), "amp is one of O0, O1", "'01'");
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) { c.batch_size = 0; }), "batch-size must be at least 1");
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) { c.lr = NAN; }), "lr must be a finite number");
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) { c.label_smoothing = 2; }), "label-smoothing is in [0, 1]");
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) {
                      c.clip_grad_norm = 1;
                      c.clip_grad_value = 1;
                    }),
                    "alternatives");
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) { c.milestones = {-1}; }), "milestones must be positive");
  EXPECT_KILN_ERROR(invalid([](TrainConfig& c) { c.pos_weight = "auto"; }), "pos-weight applies to the bce loss");
}

TEST(Objective, EachLossItsOutputsScoresAndAccuracy) {
  TrainConfig config;
  const Tensor labels = tensor<int64_t>({0, 1, 1});
  const Objective ce(config, Task::Binary, 2, {}, Device::cpu());
  EXPECT_EQ(ce.name(), "cross-entropy");
  EXPECT_EQ(ce.outputs(), 2);
  const Tensor logits2 = tensor<float>({2, 0, 0, 1, 3, 0}, {3, 2});
  EXPECT_TRUE(testing::all_close(sum(ce.scores(logits2), {1}), ones({3}), {1e-6, 1e-6}));
  EXPECT_EQ(ce.correct(logits2, labels).item<int64_t>(), 2);

  config.loss = "bce";
  config.pos_weight = "auto";
  const Objective bce(config, Task::Binary, 2, {30, 10}, Device::cpu());
  EXPECT_EQ(bce.outputs(), 1);
  EXPECT_EQ(bce.pos_weight(), 3.0);
  const Tensor logits1 = tensor<float>({-1, 2, -3}, {3, 1});
  EXPECT_EQ(bce.scores(logits1).sizes(), (std::vector<int64_t>{3}));
  EXPECT_EQ(bce.correct(logits1, labels).item<int64_t>(), 2);
  // pos_weight scales the positives' terms: loss = mean(w y softplus(-x) + (1 - y) softplus(x)).
  const double expected =
      (std::log1p(std::exp(-1.0)) + 3 * std::log1p(std::exp(-2.0)) + 3 * std::log1p(std::exp(3.0))) / 3;
  EXPECT_NEAR(bce.loss(logits1, labels).item<double>(), expected, 1e-6);
  EXPECT_KILN_ERROR(Objective(config, Task::Binary, 2, {30, 0}, Device::cpu()), "no positive sample");
  config.pos_weight = "ten";
  EXPECT_KILN_ERROR(Objective(config, Task::Binary, 2, {}, Device::cpu()), "pos-weight is a positive number",
                    "'ten'");
  config.pos_weight = "";
  EXPECT_KILN_ERROR(Objective(config, Task::MultiClass, 3, {}, Device::cpu()), "bce is for binary tasks");

  config.loss = "mse";
  const Objective mse(config, Task::MultiClass, 3, {}, Device::cpu());
  EXPECT_EQ(mse.outputs(), 1);
  const Tensor outputs = tensor<float>({0.2f, 1.4f, 1.9f}, {3, 1});
  EXPECT_EQ(argmax(mse.scores(outputs), 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(mse.correct(outputs, labels).item<int64_t>(), 2);

  // Note [Labels in range]: bce and mse take any number as a target, so a label outside
  // the classes is an error naming it (cross-entropy's gather refuses one itself).
  EXPECT_KILN_ERROR(bce.loss(logits1, tensor<int64_t>({0, 2, 1})), "loss bce: a label is 2, outside the classes 0 to 1");
  EXPECT_KILN_ERROR(mse.loss(outputs, tensor<int64_t>({0, -1, 2})), "loss mse: a label is -1, outside the classes 0 to 2");
  config.loss = "multilabel-bce";
  const Objective multi(config, Task::MultiLabel, 2, {}, Device::cpu());
  EXPECT_KILN_ERROR(multi.loss(tensor<float>({0, 0}, {1, 2}), tensor<float>({1, 3}, {1, 2})),
                    "loss multilabel-bce: a label is 3, outside the values 0 to 1");
  EXPECT_KILN_ERROR(multi.loss(tensor<float>({0, 0}, {1, 2}), tensor<float>({1, NAN}, {1, 2})),
                    "loss multilabel-bce: a label is nan, outside the values 0 to 1");
  {  // in a training loop one check per log interval reads the flag of all its batches
    DeferIndexChecks deferred;
    for (int step = 0; step < 3; ++step) bce.loss(logits1, tensor<int64_t>({0, 1, 1}));
    EXPECT_EQ(deferred.pending(), 1u);
    deferred.check();  // all within
    bce.loss(logits1, tensor<int64_t>({0, 1, 1}));
    bce.loss(logits1, tensor<int64_t>({1, 0, 5}));
    bce.loss(logits1, tensor<int64_t>({0, 0, 0}));
    EXPECT_EQ(deferred.pending(), 1u);
    EXPECT_KILN_ERROR(deferred.check(), "loss bce: a label is 5");
    bce.loss(logits1, tensor<int64_t>({0, 1, 1}));  // the next interval starts clean
    EXPECT_EQ(deferred.pending(), 1u);
    deferred.check();
  }

  config.loss = "cross-entropy";
  config.class_weights = {1, 2, 3};
  EXPECT_KILN_ERROR(Objective(config, Task::Binary, 2, {}, Device::cpu()), "2 classes need 2 weights");
}

TEST(Schedule, EachSchedulerStepsAtItsGranularity) {
  const auto lr_after = [](const std::string& scheduler, int steps, int epochs, double metric = 0) {
    TrainConfig config;
    config.scheduler = scheduler;
    config.lr = 0.1;
    config.epochs = 10;
    config.milestones = {0.5};
    Tensor p = zeros({2}).requires_grad_(true);
    optim::Adam adam({p}, {.lr = config.lr});
    Schedule schedule(config, adam, /*steps_per_epoch=*/4, /*higher_is_better=*/false);
    for (int e = 0; e < epochs; ++e) {
      for (int s = 0; s < steps; ++s) schedule.after_step();
      schedule.after_validation(metric);
      schedule.after_epoch();
    }
    return schedule.lr();
  };
  EXPECT_NEAR(lr_after("multistep", 4, 5), 0.01, 1e-12);  // milestone 0.5 x 10 = epoch 5
  EXPECT_NEAR(lr_after("multistep", 4, 4), 0.1, 1e-12);
  EXPECT_NEAR(lr_after("multistep", 100, 4), 0.1, 1e-12);  // batches do not move it
  EXPECT_NEAR(lr_after("cyclic", 4, 1), 1.0, 1e-12);       // up for one epoch of steps: base 0.1 -> max 1.0
  EXPECT_NEAR(lr_after("cyclic", 2, 1), 0.55, 1e-12);
  EXPECT_NEAR(lr_after("cosine", 4, 10), 0.0, 1e-12);
  EXPECT_NEAR(lr_after("plateau", 0, 12, 1.0), 0.01, 1e-12);  // no improvement after 10 + 1 validations
  EXPECT_NEAR(lr_after("none", 4, 3), 0.1, 1e-12);
}

}  // namespace
}  // namespace kiln
