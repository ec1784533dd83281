// Training checkpoints (train/checkpoint.h): a process killed with SIGKILL while writing
// one leaves the previous one whole and readable; files that are not checkpoints, or
// whose state is damaged, are errors naming them; checkpoint names sort by progress and
// pruning keeps the newest; the default generators' states round-trip; the same-run
// check names every identity field that differs and lets the others change.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/generator.h"
#include "core/ops.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"

namespace kiln {
namespace {

using namespace train;
using testing::TempFolder;

CheckpointContents version(int64_t number) {
  CheckpointContents contents;
  contents.tensors.emplace_back("model.weight", full({1 << 22}, static_cast<double>(number)));  // 16 MB
  contents.state = json::Value::object({{"format", json::Value::integer(1)},
                                        {"version", json::Value::integer(number)},
                                        {"config", json::Value::object()},
                                        {"progress", json::Value::object()},
                                        {"optimizer", json::Value::array()},
                                        {"scheduler", json::Value()},
                                        {"scaler", json::Value::object()},
                                        {"generators", json::Value::object()},
                                        {"logs", json::Value::object()}});
  return contents;
}

// A checkpoint read back is one whole version: its tensor holds the number its state says.
void expect_whole(const std::string& path) {
  const CheckpointContents read = read_checkpoint(path);
  const int64_t number = read.state.find("version")->as_integer();
  ASSERT_EQ(read.tensors.size(), 1u);
  EXPECT_TRUE(testing::all_equal(read.tensors[0].second, full({1 << 22}, static_cast<double>(number))))
      << "version " << number;
}

TEST(Checkpoint, AProcessKilledWhileWritingLeavesThePreviousCheckpointWhole) {
  TempFolder folder;
  const std::string path = folder.file("checkpoints/epoch-0001.safetensors");
  // Made before fork: the child only writes (no thread pool, no new tensors after fork).
  const CheckpointContents versions[2] = {version(1), version(2)};
  write_checkpoint(versions[0], path);
  for (int trial = 0; trial < 6; ++trial) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int64_t i = 0;; ++i) write_checkpoint(versions[i % 2], path);  // until killed
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15 + 25 * trial));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    expect_whole(path);
  }
}

TEST(Checkpoint, FilesThatAreNotCheckpointsAreErrorsNamingThem) {
  TempFolder folder;
  const std::string weights = folder.file("weights.safetensors");
  safetensors::save({{"w", ones({2})}}, weights);
  EXPECT_KILN_ERROR(read_checkpoint(weights), weights, "not a Kiln training checkpoint");
  const std::string bad_json = folder.file("bad.safetensors");
  safetensors::save({{"w", ones({2})}}, bad_json, {{"kiln.checkpoint", "{\"format\": 1,"}});
  EXPECT_KILN_ERROR(read_checkpoint(bad_json), bad_json, "not valid JSON");
  const std::string future = folder.file("future.safetensors");
  safetensors::save({{"w", ones({2})}}, future, {{"kiln.checkpoint", "{\"format\": 7}"}});
  EXPECT_KILN_ERROR(read_checkpoint(future), "unknown checkpoint format");
  const std::string partial = folder.file("partial.safetensors");
  safetensors::save({{"w", ones({2})}}, partial, {{"kiln.checkpoint", "{\"format\": 1, \"config\": {}}"}});
  EXPECT_KILN_ERROR(read_checkpoint(partial), "has no \"progress\"");
  const std::string truncated = folder.file("truncated.safetensors");
  write_checkpoint(version(3), truncated);
  std::filesystem::resize_file(truncated, 1000);
  EXPECT_KILN_ERROR(read_checkpoint(truncated), truncated);
}

TEST(Checkpoint, NamesSortByProgressAndPruningKeepsTheNewest) {
  EXPECT_EQ(checkpoint_name(3, 0), "epoch-0003.safetensors");
  EXPECT_EQ(checkpoint_name(3, 120), "epoch-0003-batch-000120.safetensors");
  TempFolder folder;
  const std::string run = folder.path().string();
  for (const auto& [epoch, batch] :
       std::vector<std::pair<int, int>>{{2, 0}, {3, 40}, {3, 0}, {1, 0}, {3, 7}}) {
    write_checkpoint(version(epoch),
                     (folder.path() / "checkpoints" / checkpoint_name(epoch, batch)).string());
  }
  std::ofstream((folder.path() / "checkpoints" / "notes.txt").string()) << "not a checkpoint";
  std::vector<std::string> names;
  for (const std::string& path : list_checkpoints(run))
    names.push_back(std::filesystem::path(path).filename());
  EXPECT_EQ(names,
            (std::vector<std::string>{"epoch-0001.safetensors", "epoch-0002.safetensors",
                                      "epoch-0003-batch-000007.safetensors",
                                      "epoch-0003-batch-000040.safetensors", "epoch-0003.safetensors"}));
  prune_checkpoints(run, 2, "epoch-0001.safetensors");  // the best epoch's stays
  ASSERT_EQ(list_checkpoints(run).size(), 3u);
  EXPECT_TRUE(list_checkpoints(run).front().ends_with("epoch-0001.safetensors"));
  prune_checkpoints(run, 2);
  ASSERT_EQ(list_checkpoints(run).size(), 2u);
  EXPECT_TRUE(list_checkpoints(run).back().ends_with("epoch-0003.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(folder.path() / "checkpoints" / "notes.txt"));
  EXPECT_TRUE(list_checkpoints(folder.file("nowhere")).empty());
}

TEST(Checkpoint, GeneratorStatesRoundTrip) {
  manual_seed(11);
  (void)rand({100});
  const json::Value saved = generator_states();
  const Tensor expected = rand({5});
  (void)rand({1000});
  restore_generator_states(saved, "test");
  EXPECT_TRUE(testing::all_equal(rand({5}), expected));
  EXPECT_KILN_ERROR(restore_generator_states(json::Value::object({{"cpu", json::Value::integer(3)}}), "ck"),
                    "ck", "generator cpu is not [seed, offset]");
}

TEST(Checkpoint, TheSameRunCheckNamesIdentityFieldsOnly) {
  TrainConfig config;
  const json::Value saved = to_json(config);
  TrainConfig changed = config;
  changed.epochs = 50;
  changed.workers = 7;
  changed.device = "cpu";
  check_same_run(saved, changed, "ck");  // may change on resume
  changed.scheduler = "multistep";
  changed.milestones = {30, 60};  // in epochs: more epochs leave them where they are
  TrainConfig absolute = config;
  absolute.scheduler = "multistep";
  absolute.milestones = {30, 60};
  check_same_run(to_json(absolute), changed, "ck");
  for (const std::string scheduler : {"onecycle", "cosine", "linear"}) {
    TrainConfig laid_out = config;
    laid_out.scheduler = scheduler;
    TrainConfig longer = laid_out;
    longer.epochs = 20;
    EXPECT_KILN_ERROR(check_same_run(to_json(laid_out), longer, "ck"),
                      "epochs: the checkpoint has 10, this run 20",
                      "the " + scheduler + " schedule is laid out over them");
  }
  TrainConfig fractions = config;
  fractions.scheduler = "multistep";
  fractions.milestones = {0.5, 0.75};
  TrainConfig fractions_longer = fractions;
  fractions_longer.epochs = 20;
  EXPECT_KILN_ERROR(check_same_run(to_json(fractions), fractions_longer, "ck"),
                    "epochs: the checkpoint has 10");
  changed.scheduler = config.scheduler;
  changed.milestones = config.milestones;
  changed.model = "densenet121";
  changed.batch_size = 4;
  EXPECT_KILN_ERROR(check_same_run(saved, changed, "ck"), "ck is a checkpoint of a different run",
                    "model: the checkpoint has resnet18, this run densenet121",
                    "batch-size: the checkpoint has 32, this run 4");
}

}  // namespace
}  // namespace kiln
