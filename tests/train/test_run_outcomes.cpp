// How a run ends when its numbers go wrong (train/trainer.cpp): a diverged run stops at the
// log step that reads a non-finite loss, naming the step and the usual causes, with the
// checkpoints before it kept (Note [A diverged run]); a validation metric that is
// undefined (NaN) hands the choice of the best epoch to the validation loss, saying so
// (Note [An undefined monitor]); the closing lines list only files the folder holds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "data/nifti.h"
#include "data/synthetic.h"
#include "tests/test_util.h"
#include "tests/train/tiny_run.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace train;
using testing::TempFolder;

TrainConfig tiny(const std::string& out) {
  TrainConfig config = testing::tiny_run_config(out);
  config.epochs = 3;
  config.log_every = 1;
  return config;
}

testing::TinyRun train_in(const TrainConfig& config, const TrainData& data) { return testing::run_tiny(config, &data); }

TEST(RunOutcomes, ADivergedRunStopsNamingTheStepAndKeepsItsCheckpoints) {
  TempFolder folder;
  TrainConfig config = tiny(folder.file("run"));
  config.scheduler = "exponential";
  config.gamma = 1e30;  // epoch 1 trains at 1e-3; epoch 2 at 1e27
  const TrainData data = make_train_data(config);
  // The first batch of epoch 2 still trains from epoch 1's weights; its step sends them to NaN.
  EXPECT_KILN_ERROR(train_in(config, data), "the training loss is NaN at epoch 2, batch 2", "diverged", "--lr",
                    "--clip-grad-norm", "The last checkpoint before it is kept: " + folder.file("run/checkpoints/epoch-0001.safetensors"));
  EXPECT_TRUE(fs::exists(folder.file("run/checkpoints/epoch-0001.safetensors")));
  EXPECT_FALSE(fs::exists(folder.file("run/checkpoints/epoch-0002.safetensors")));
  config.out = folder.file("at-once");
  config.lr = 1e30;
  config.scheduler = "none";
  EXPECT_KILN_ERROR(train_in(config, data), "at epoch 1, batch 2", "No checkpoint was written before it");
}

// A multi-label task whose second label never occurs in the validation split: its AUC, and
// so the mean AUC the run monitors, is undefined.
TEST(RunOutcomes, AnUndefinedMonitorHandsTheChoiceToTheValidationLoss) {
  TempFolder folder;
  const data::SyntheticShapes shapes({.size = 30, .side = 8, .seed = 3});
  std::string csv = "image,round,square,split\n";
  for (int64_t i = 0; i < shapes.size(); ++i) {
    const data::Sample sample = shapes.get(i);
    const std::string file = std::to_string(i) + ".nii.gz";
    data::nifti::write(folder.file(file), sample.at("image"));
    const int64_t label = sample.at("label").item<int64_t>();
    const std::string split = i < 20 ? "train" : i < 25 ? "val" : "test";
    csv += file + "," + (label == 0 ? "1" : "0") + "," + (split != "val" && label == 1 ? "1" : "0") + "," + split + "\n";
  }
  std::ofstream(folder.file("scans.csv")) << csv;
  TrainConfig config = tiny(folder.file("run"));
  config.dataset = folder.file("scans.csv");
  config.label_columns = "round,square";
  const testing::TinyRun outcome = train_in(config, make_train_data(config));
  EXPECT_NE(outcome.output.find("val auc is undefined (NaN; a class absent from the validation split?): the best "
                                "epoch is chosen by val loss from now on"),
            std::string::npos)
      << outcome.output;
  EXPECT_GE(outcome.summary.best_epoch, 1);
  EXPECT_TRUE(fs::exists(folder.file("run/best.safetensors")));
  const std::string closing = format_summary(outcome.summary);
  EXPECT_NE(closing.find("best.safetensors"), std::string::npos) << closing;
  EXPECT_NE(closing.find("final.safetensors"), std::string::npos) << closing;
}

// A run without validation that improved writes no best.safetensors, and does not say it did.
TEST(RunOutcomes, TheClosingLinesListOnlyFilesThatExist) {
  TempFolder folder;
  TrainConfig config = tiny(folder.file("run"));
  config.epochs = 1;
  config.tensorboard = false;
  const testing::TinyRun outcome = train_in(config, make_train_data(config));
  const std::string closing = format_summary(outcome.summary);
  EXPECT_EQ(closing.find("TensorBoard"), std::string::npos) << closing;
  for (const std::string& file : outcome.summary.files) EXPECT_TRUE(fs::exists(folder.file("run/" + file))) << file;
}

}  // namespace
}  // namespace kiln
