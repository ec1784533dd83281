// A run folder under mistakes (train/run_folder.h, Note [Only Kiln's files]; train/
// run_lock.h): a folder of the user's own files is never cleared, and is refused without
// --overwrite; with it, the user's files stay and one a run would replace is refused; the
// root, home and current folders are no run folders; two trainers never share a folder,
// and a dead one's lock is no obstacle; a refused resume changes nothing; kiln reproduce
// reuses only a run of the same settings.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/text_file.h"
#include "tests/test_util.h"
#include "tests/train/tiny_run.h"
#include "tools/cli.h"
#include "train/model_setup.h"
#include "train/run_lock.h"
#include "train/trainer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace train;
using testing::TempFolder;

TrainConfig tiny(const std::string& out) {
  TrainConfig config = testing::tiny_run_config(out);
  config.synthetic_samples = 16;
  return config;
}

std::string train_in(const TrainConfig& config) { return testing::run_tiny(config).output; }

std::vector<std::string> entries(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(folder))
    names.push_back(fs::relative(entry.path(), folder).string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(RunFolderSafety, TheUsersOwnFilesAreNeverClearedNorReplaced) {
  TempFolder folder;
  const std::string proj = folder.file("proj");
  fs::create_directories(proj + "/checkpoints");
  std::ofstream(proj + "/checkpoints/model_best.pth") << "mine";
  std::ofstream(proj + "/best.safetensors") << "mine too";
  std::ofstream(proj + "/notes.txt") << "and this";
  const std::vector<std::string> before = entries(proj);
  EXPECT_KILN_ERROR(train_in(tiny(proj)), "holds files that are not a Kiln run's", "--overwrite");
  EXPECT_EQ(entries(proj), before);  // nothing deleted, nothing added (not even a lock)
  TrainConfig overwrite = tiny(proj);
  overwrite.overwrite = true;
  EXPECT_KILN_ERROR(train_in(overwrite), "holds your", "which a run would replace");
  EXPECT_EQ(entries(proj), before);
  fs::remove(proj + "/best.safetensors");
  fs::remove_all(proj + "/checkpoints");
  train_in(overwrite);  // beside the user's notes
  EXPECT_EQ(read_text_file(proj + "/notes.txt"), "and this");
  // In Kiln's own folder, --overwrite removes only what Kiln wrote.
  std::ofstream(proj + "/checkpoints/keep.txt") << "a file of the user's in Kiln's folder";
  std::ofstream(proj + "/events.out.tfevents.123.host.1.pytorch") << "another writer's events";
  train_in(overwrite);
  EXPECT_EQ(read_text_file(proj + "/checkpoints/keep.txt"), "a file of the user's in Kiln's folder");
  EXPECT_TRUE(fs::exists(proj + "/events.out.tfevents.123.host.1.pytorch"));
  EXPECT_EQ(read_text_file(proj + "/notes.txt"), "and this");
}

TEST(RunFolderSafety, RootHomeAndTheCurrentFolderAreNoRunFolders) {
  TempFolder folder;
  TrainConfig config = tiny("/");
  config.overwrite = true;
  EXPECT_KILN_ERROR(train_in(config), "run folder / is the file system's root");
  const char* home = std::getenv("HOME");
  const std::string saved_home = home ? home : "";
  ::setenv("HOME", folder.path().c_str(), 1);
  config.out = folder.path().string();
  EXPECT_KILN_ERROR(train_in(config), "is your home folder");
  if (!saved_home.empty()) ::setenv("HOME", saved_home.c_str(), 1);
  config.out = ".";
  EXPECT_KILN_ERROR(train_in(config), "run folder . is the current folder");
}

TEST(RunFolderSafety, TwoTrainersNeverShareAFolderAndADeadOnesLockIsNoObstacle) {
  TempFolder folder;
  const std::string run = folder.file("run");
  {
    const RunLock held{RunFolder(run)};
    EXPECT_KILN_ERROR(train_in(tiny(run)), "is in use by another kiln train (pid " + std::to_string(::getpid()));
  }
  // A process that took the lock and died (kill -9) leaves the file, not the lock.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const RunLock held{RunFolder(run)};
    std::ofstream(run + "/.taken") << "1";
    ::pause();
    std::_Exit(0);
  }
  for (int i = 0; i < 500 && !fs::exists(run + "/.taken"); ++i) ::usleep(10000);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  fs::remove(run + "/.taken");
  train_in(tiny(run));
  EXPECT_TRUE(fs::exists(run + "/summary.json"));
}

TEST(RunFolderSafety, ARefusedResumeChangesNothing) {
  TempFolder folder;
  const std::string run = folder.file("run");
  train_in(tiny(run));
  const std::string config_before = read_text_file(run + "/config.json");
  const auto written = fs::last_write_time(run + "/config.json");
  const std::vector<std::string> before = entries(run);
  TrainConfig other = tiny(run);
  other.width = 0.125;
  other.resume = "auto";
  EXPECT_KILN_ERROR(train_in(other), "is a checkpoint of a different run", "width");
  EXPECT_EQ(read_text_file(run + "/config.json"), config_before);
  EXPECT_EQ(fs::last_write_time(run + "/config.json"), written);
  EXPECT_EQ(entries(run), before);
}

TEST(RunFolderSafety, ReproduceReusesOnlyARunOfTheSameSettings) {
  TempFolder folder;
  const auto reproduce = [&](const std::string& model) {
    std::ostringstream out, err;
    int code = -1;
    testing::with_watchdog(std::chrono::seconds(120), [&] {
      code = tools::run_kiln({"reproduce", "medmnist", "--datasets", "synthetic", "--seeds", "1", "--size", "8",
                              "--synthetic-samples", "16", "--model", model, "--width", "0.0625", "--epochs", "1",
                              "--batch-size", "8", "--workers", "0", "--device", "cpu", "--out", folder.file("r")},
                             out, err);
    });
    return std::make_pair(code, err.str());
  };
  ASSERT_EQ(reproduce("resnet10").first, 0);
  const auto [code, err] = reproduce("resnet18");
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("summary.json is a summary of a different run"), std::string::npos) << err;
  EXPECT_NE(err.find("model: the summary has resnet10, this run resnet18"), std::string::npos) << err;
}

}  // namespace
}  // namespace kiln
