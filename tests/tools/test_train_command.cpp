// `kiln train`, `kiln eval` and `kiln predict` through run_kiln (tools/cli.h) on tiny
// synthetic runs: flags over a configuration file over a recipe; --help listing every
// setting with its default; eval and predict from a run's weights alone; the errors a user
// makes ending in one line with exit code 1 (or 2 for wrong flags).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "data/npy.h"
#include "core/text_file.h"
#include "tests/test_util.h"
#include "tools/cli.h"
#include "train/config.h"

namespace kiln {
namespace {

using testing::TempFolder;

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult run_cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = -1;
  testing::with_watchdog(std::chrono::seconds(300), [&] { code = tools::run_kiln(args, out, err); });
  return {code, out.str(), err.str()};
}

// A tiny run's flags, with the run folder.
std::vector<std::string> tiny(const std::string& out) {
  return {"train",  "--size",       "12",       "--synthetic-samples",
          "40",     "--model",      "resnet10", "--width",
          "0.0625", "--batch-size", "8",        "--epochs",
          "2",      "--workers",    "0",        "--device",
          "cpu",    "--out",        out};
}

TEST(KilnTrain, FlagsOverrideTheConfigFileWhichOverridesTheRecipe) {
  TempFolder folder;
  const std::string config = folder.file("run.json");
  std::ofstream(config) << R"({"lr": 0.02, "epochs": 1, "milestones": [0.5], "pin-memory": false})";
  std::vector<std::string> args = tiny(folder.file("run"));
  args.insert(args.end(), {"--recipe", "medmnist", "--config", config, "--epochs", "2", "--augment=false"});
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  const json::Value saved = json::parse(read_text_file(folder.file("run/config.json")));
  EXPECT_EQ(saved.find("scheduler")->as_string(), "multistep");  // the recipe's
  EXPECT_EQ(saved.find("lr")->as_number(), 0.02);                // the file's over the recipe's 1e-3
  EXPECT_EQ(saved.find("milestones")->as_array().size(), 1u);    // the file's
  EXPECT_EQ(saved.find("epochs")->as_integer(), 2);              // the flag's over the file's
  EXPECT_EQ(saved.find("pin-memory")->as_bool(), false);
  EXPECT_EQ(saved.find("augment")->as_bool(), false);
  EXPECT_NE(r.out.find("configuration:\n"), std::string::npos);
  EXPECT_NE(r.out.find("run folder: " + folder.file("run")), std::string::npos);
  EXPECT_NE(r.out.find("test        epoch    ACC"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("where the time went"), std::string::npos);
}

TEST(KilnTrain, HelpListsEverySettingWithItsDefault) {
  const CliResult r = run_cli({"train", "--help"});
  ASSERT_EQ(r.code, 0);
  for (const train::ConfigField& field : train::config_fields()) {
    EXPECT_NE(r.out.find(std::string("--") + field.name + " "), std::string::npos) << field.name;
  }
  EXPECT_NE(r.out.find("--batch-size INT=32"), std::string::npos);
  EXPECT_NE(r.out.find("--pin-memory=false turns it off"), std::string::npos);
  for (const char* command : {"eval", "predict"}) {
    const CliResult help = run_cli({command, "--help"});
    EXPECT_EQ(help.code, 0);
    EXPECT_NE(help.out.find("--weights"), std::string::npos) << command;
  }
}

TEST(KilnTrain, EvalAndPredictNeedOnlyTheWeightsOfARun) {
  TempFolder folder;
  ASSERT_EQ(run_cli(tiny(folder.file("run"))).code, 0);
  const std::string weights = folder.file("run/best.safetensors");
  const CliResult eval = run_cli({"eval", "--weights", weights, "--workers", "0"});
  ASSERT_EQ(eval.code, 0) << eval.err;
  EXPECT_NE(eval.out.find("(10 samples)"), std::string::npos) << eval.out;
  EXPECT_NE(eval.out.find("confusion matrix"), std::string::npos);
  // The AUC eval prints is the one the run's summary reports for its best weights.
  const json::Value summary = json::parse(read_text_file(folder.file("run/summary.json")));
  const double auc = summary.find("test")->as_array()[0].find("metrics")->find("auc")->as_number();
  char expected[32];
  std::snprintf(expected, sizeof expected, "AUC %.4f", auc);
  EXPECT_NE(eval.out.find(expected), std::string::npos) << eval.out;

  const CliResult csv =
      run_cli({"predict", "--weights", weights, "--output", folder.file("p.csv"), "--split", "val"});
  ASSERT_EQ(csv.code, 0) << csv.err;
  const std::string table = read_text_file(folder.file("p.csv"));
  EXPECT_TRUE(table.starts_with("index,label,score_0,score_1,score_2\n")) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 11);
  ASSERT_EQ(run_cli({"predict", "--weights", weights, "--output", folder.file("p.npy")}).code, 0);
  const Tensor scores = data::npy::load(folder.file("p.npy"));
  EXPECT_EQ(scores.sizes(), (std::vector<int64_t>{10, 3}));
}

// Weights scored on other data than their run's are flagged; a training checkpoint serves
// as weights; an output folder that does not exist fails before the scoring.
TEST(KilnTrain, EvalSaysWhenTheDataIsNotTheWeightsOwn) {
  TempFolder folder;
  ASSERT_EQ(run_cli(tiny(folder.file("run"))).code, 0);
  const CliResult other = run_cli({"eval", "--weights", folder.file("run/best.safetensors"), "--size", "16"});
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_NE(other.out.find("warning: the weights were trained with --size 12; this evaluation uses 16"),
            std::string::npos)
      << other.out;
  const CliResult same = run_cli({"eval", "--weights", folder.file("run/best.safetensors")});
  EXPECT_EQ(same.out.find("warning"), std::string::npos) << same.out;
  const CliResult checkpoint = run_cli({"eval", "--weights", folder.file("run/checkpoints/epoch-0002.safetensors")});
  ASSERT_EQ(checkpoint.code, 0) << checkpoint.err;
  const CliResult nowhere = run_cli({"predict", "--weights", folder.file("run/best.safetensors"), "--output",
                                     folder.file("no/such/folder/p.csv")});
  EXPECT_EQ(nowhere.code, 1);
  EXPECT_NE(nowhere.err.find("does not exist"), std::string::npos) << nowhere.err;
}

// Note [Tensor checksums]: a bit flipped in a run's files after they were written stops
// `kiln eval` and `--resume`, naming the file and the tensor, instead of scoring or
// training on damaged weights.
TEST(KilnTrain, DamagedWeightsAndCheckpointsAreRefusedNamingTheTensor) {
  TempFolder folder;
  ASSERT_EQ(run_cli(tiny(folder.file("run"))).code, 0);
  const std::string weights = folder.file("run/best.safetensors");
  const std::string damaged_weight = testing::flip_a_bit_of_the_largest_tensor(weights);
  const CliResult eval = run_cli({"eval", "--weights", weights, "--workers", "0"});
  EXPECT_EQ(eval.code, 1);
  EXPECT_NE(eval.err.find(weights + ": tensor '" + damaged_weight + "' does not match its checksum"), std::string::npos)
      << eval.err;
  const std::string checkpoint = folder.file("run/checkpoints/epoch-0002.safetensors");
  const std::string damaged_state = testing::flip_a_bit_of_the_largest_tensor(checkpoint);
  std::vector<std::string> resume = tiny(folder.file("run"));
  resume.insert(resume.end(), {"--epochs", "3", "--resume", "auto"});
  const CliResult resumed = run_cli(resume);
  EXPECT_EQ(resumed.code, 1);
  EXPECT_NE(resumed.err.find(checkpoint + ": tensor '" + damaged_state + "' does not match its checksum"),
            std::string::npos)
      << resumed.err;
  EXPECT_FALSE(std::filesystem::exists(folder.file("run/checkpoints/epoch-0003.safetensors")));
}

TEST(KilnTrain, PretrainedWeightsLoadByNameWithTheReportPrinted) {
  TempFolder folder;
  ASSERT_EQ(run_cli(tiny(folder.file("first"))).code, 0);
  std::vector<std::string> args = tiny(folder.file("second"));
  args.insert(args.end(), {"--pretrained", folder.file("first/best.safetensors")});
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("pretrained weights from " + folder.file("first/best.safetensors")), std::string::npos);
  EXPECT_NE(r.out.find("loaded 74 of 74 tensors into ResNet3d: everything matched"), std::string::npos) << r.out;
  args = tiny(folder.file("third"));
  args.insert(args.end(), {"--pretrained", folder.file("first/best.safetensors"), "--model", "resnet18"});
  const CliResult partial = run_cli(args);
  ASSERT_EQ(partial.code, 0) << partial.err;
  EXPECT_NE(partial.out.find("missing"), std::string::npos) << partial.out;  // resnet18's second blocks
}

TEST(KilnTrain, UserErrorsEndInOneLineWithExitCode1) {
  TempFolder folder;
  const auto error_of = [](std::vector<std::string> args) {
    const CliResult r = run_cli(std::move(args));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    return r.err;
  };
  std::vector<std::string> args = tiny(folder.file("a"));
  args.insert(args.end(), {"--model", "vgg16"});
  EXPECT_NE(error_of(args).find("kiln: unknown model 'vgg16'"), std::string::npos);

  args = tiny(folder.file("b"));
  args.insert(args.end(),
              {"--dataset", "adrenalmnist3d", "--size", "28", "--data-root", folder.file("nothing")});
  const std::string missing = error_of(args);
  EXPECT_NE(missing.find("kiln data download adrenalmnist3d"), std::string::npos) << missing;

  args = tiny(folder.file("c"));
  args.insert(args.end(), {"--batch-size", "64", "--drop-last"});
  EXPECT_NE(error_of(args).find("batch-size 64 is larger than the training set (40 samples) with drop-last"),
            std::string::npos);

  ASSERT_EQ(run_cli(tiny(folder.file("d"))).code, 0);
  args = tiny(folder.file("d"));
  args.insert(args.end(), {"--width", "0.125", "--resume", "auto"});
  EXPECT_NE(error_of(args).find("is a checkpoint of a different run"), std::string::npos);

  const std::string config = folder.file("bad.json");
  std::ofstream(config) << R"({"batch_size": 3})";
  EXPECT_NE(error_of({"train", "--config", config}).find("unknown setting \"batch_size\""),
            std::string::npos);
  EXPECT_NE(error_of({"eval", "--weights", folder.file("d/best.safetensors"), "--model", "resnet18"})
                .find("does not fit model resnet18"),
            std::string::npos);

  const CliResult usage = run_cli({"train", "--batch-size", "many"});
  EXPECT_EQ(usage.code, 2);
  EXPECT_NE(usage.err.find("usage: kiln train"), std::string::npos);
  EXPECT_EQ(run_cli({"eval"}).code, 2);  // --weights is required
}

TEST(KilnReproduce, MeanAndSampleSdInTheBenchmarksLayout) {
  EXPECT_EQ(tools::mean_and_sd({0.8, 0.9, 1.0}), "0.900±0.100");
  EXPECT_EQ(tools::mean_and_sd({0.75}), "0.750");
  const std::string table = tools::format_reproduce_table(
      "resnet18 + 3D", {"adrenalmnist3d", "vesselmnist3d"},
      {{{0.7, 0.8, 0.6, 0.9}, {0.8, 0.9, 0.7, 0.8}}, {{0.9, 0.85, 0.9, 0.8}, {0.9, 0.95, 0.9, 0.9}}});
  EXPECT_NE(table.find("Methods"), std::string::npos);
  EXPECT_NE(table.find("adrenalmnist3d"), std::string::npos);
  // best row: adrenal AUC 0.85±0.071, ACC 0.75±0.071; vessel AUC 0.9±0.071, ACC 0.9±0.
  EXPECT_NE(table.find("resnet18 + 3D (best val AUC)      0.850±0.071   0.750±0.071   0.900±0.071   0.900±0.000"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("resnet18 + 3D (final epoch)"), std::string::npos);
}

// Two seeds of a tiny synthetic run; run again, the summaries are reused, not retrained.
TEST(KilnReproduce, RunsEachSeedOnceAndReusesFinishedRuns) {
  TempFolder folder;
  const std::vector<std::string> args = {"reproduce", "medmnist", "--datasets", "synthetic", "--seeds", "2",
                                         "--size", "12", "--synthetic-samples", "40", "--model", "resnet10",
                                         "--width", "0.0625", "--epochs", "1", "--batch-size", "8", "--workers",
                                         "0", "--device", "cpu", "--out", folder.file("r")};
  const CliResult first = run_cli(args);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("== synthetic, seed 1"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(folder.file("r/synthetic-seed0/summary.json")));
  EXPECT_TRUE(std::filesystem::exists(folder.file("r/synthetic-seed1/summary.json")));
  const CliResult second = run_cli(args);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(second.out.find("== synthetic"), std::string::npos);
  EXPECT_NE(second.out.find("done before"), std::string::npos);
  const auto table_of = [](const std::string& out) { return out.substr(out.find("test split, 2 seeds")); };
  EXPECT_EQ(table_of(second.out), table_of(first.out));
  EXPECT_EQ(run_cli({"reproduce"}).code, 2);
  EXPECT_EQ(run_cli({"reproduce", "medmnist"}).code, 2);  // --datasets is required
}

}  // namespace
}  // namespace kiln
