// Small mistakes, caught or explained (issue: nothing silently wrong): a configuration
// file that is a pipe or a device (core/text_file.h), milestones past the run's last
// epoch, negative or all-zero class weights, what "resumed from" says of a mid-epoch
// checkpoint, the lr column holding the rate the epoch trained with, and control
// characters in a configuration refused and shown escaped.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "core/text_file.h"
#include "data/csv.h"
#include "tests/test_util.h"
#include "tests/train/tiny_run.h"
#include "train/config.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln {
namespace {

using namespace train;
using testing::TempFolder;

TEST(SmallMistakes, AConfigurationThatIsAPipeOrADeviceIsRefusedNotRead) {
  TempFolder folder;
  ASSERT_EQ(::mkfifo(folder.file("pipe.json").c_str(), 0600), 0);
  testing::with_watchdog(std::chrono::seconds(30), [&] {
    EXPECT_KILN_ERROR(read_text_file(folder.file("pipe.json"), "--config"), "--config", "pipe.json",
                      "not a regular file");
    EXPECT_KILN_ERROR(read_text_file("/dev/zero", "--config"), "/dev/zero", "not a regular file");
    EXPECT_KILN_ERROR(read_text_file(folder.path().string(), "--config"), "not a regular file");
  });
}

// A NUL or another control character in a configuration is refused, and every message
// shows it escaped: raw, it cut the line short ("unknown model 'res").
TEST(SmallMistakes, ControlCharactersInAConfigurationAreRefusedEscaped) {
  TrainConfig config;
  EXPECT_KILN_ERROR(update_from_json(config, json::parse(std::string("{\"model\": \"res\\u0000net18\"}")), "run.json"),
                    "run.json: \"model\" must be text without control characters, got \"res\\u0000net18\"");
  EXPECT_KILN_ERROR(update_from_json(config, json::parse(std::string("{\"out\": \"a\\nb\"}")), "run.json"),
                    "\"out\" must be text without control characters");
  try {
    update_from_json(config, json::parse(std::string("{\"mod\\u0000el\": 1}")), "run.json");
    ADD_FAILURE() << "an unknown key was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\0'), std::string::npos);
    EXPECT_NE(message.find("unknown setting \"mod\\x00el\""), std::string::npos) << message;
  }
  EXPECT_EQ(config.model, TrainConfig{}.model);
}

TEST(SmallMistakes, MilestonesPastTheLastEpochAndBadClassWeightsAreRefused) {
  TrainConfig config;
  config.scheduler = "multistep";
  config.epochs = 10;
  config.milestones = {5, 30};
  EXPECT_KILN_ERROR(validate(config), "a milestone at epoch 30 of 10 epochs would never apply");
  config.milestones = {0.5, 0.75};
  validate(config);
  config.class_weights = {1, -1};
  EXPECT_KILN_ERROR(validate(config), "class-weights must be finite and >= 0, got -1");
  config.class_weights = {0, 0};
  EXPECT_KILN_ERROR(validate(config), "class-weights are all 0");
}

TEST(SmallMistakes, ResumeSaysWhereItResumesAndTheLrColumnIsTheEpochsRate) {
  TempFolder folder;
  TrainConfig config = testing::tiny_run_config(folder.file("run"));
  config.epochs = 2;
  config.lr = 0.01;
  config.scheduler = "step";
  config.step_size = 1;
  config.gamma = 0.5;
  config.checkpoint_every = 2;
  config.keep_last = 100;
  testing::run_tiny(config);
  const data::CsvTable epochs = data::read_csv(folder.file("run/epochs.csv"));
  const auto lr = [&](size_t row) { return std::stod(epochs.rows[row][static_cast<size_t>(epochs.column("lr"))]); };
  EXPECT_DOUBLE_EQ(lr(0), 0.01);   // epoch 1 trained at the initial rate
  EXPECT_DOUBLE_EQ(lr(1), 0.005);  // epoch 2 at half of it
  TrainConfig again = config;
  again.resume = folder.file("run/checkpoints/epoch-0002-batch-000002.safetensors");
  again.out = folder.file("branch");
  const std::string resumed = testing::run_tiny(again).output;
  EXPECT_NE(resumed.find("epoch-0002-batch-000002.safetensors: epoch 2 after its batch 2, step 6"), std::string::npos)
      << resumed;
}

// Note [A model that cannot take the input]: refused in set-up, naming the fix, with
// nothing written.
TEST(SmallMistakes, AModelThatCannotTakeTheInputIsRefusedBeforeAnythingIsWritten) {
  TempFolder folder;
  TrainConfig config = testing::tiny_run_config(folder.file("run"));
  config.model = "densenet121";  // the standard stem halves 8^3 volumes four times over
  EXPECT_KILN_ERROR(testing::run_tiny(config), "model densenet121 cannot take inputs of 8x8x8 voxels", "--stem small");
  EXPECT_FALSE(std::filesystem::exists(folder.file("run")));
  config.stem = "small";
  config.width = 0.25;
  EXPECT_EQ(testing::run_tiny(config).summary.epochs, 1);
}

// Note [A partial start]: weights that fill less than half of the model stop the run unless
// --pretrained-partial; a training checkpoint given as weights is read as its model's.
TEST(SmallMistakes, PretrainedWeightsOfAnotherModelNeedToBeAskedFor) {
  TempFolder folder;
  TrainConfig first = testing::tiny_run_config(folder.file("first"));
  first.checkpoint_every = 0;
  testing::run_tiny(first);
  TrainConfig wider = testing::tiny_run_config(folder.file("wider"));
  wider.width = 0.125;  // every convolution of another shape
  wider.pretrained = folder.file("first/best.safetensors");
  EXPECT_KILN_ERROR(testing::run_tiny(wider), "fills only", "--pretrained-partial");
  wider.pretrained_partial = true;
  EXPECT_EQ(testing::run_tiny(wider).summary.epochs, 1);
  TrainConfig from_checkpoint = testing::tiny_run_config(folder.file("third"));
  from_checkpoint.pretrained = folder.file("first/checkpoints/epoch-0001.safetensors");
  EXPECT_EQ(testing::run_tiny(from_checkpoint).summary.epochs, 1);  // its model weights, all of them
}

}  // namespace
}  // namespace kiln
