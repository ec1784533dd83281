// Stopping a run on a signal (train/stop_signals.h, Note [Stopping on a signal]): the
// handler records the first signal and a second one kills at once (in a forked child);
// the handlers go back to what they were; a Trainer asked to stop at several moments (in
// the middle of an epoch, on an epoch's last batch, between the micro-batches of an
// accumulated step) stops at an optimizer step's end with a checkpoint, and --resume auto
// then ends with weights bit-identical to a run never stopped; and `kiln train` and
// `kiln launch ... --ddp` as processes, sent SIGTERM, exit 143 with the checkpoint written,
// their resumed runs bit-identical to uninterrupted ones.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "core/safetensors.h"
#include "data/dataset.h"
#include "tests/child_process.h"
#include "tests/test_util.h"
#include "tests/train/tiny_run.h"
#include "train/run_folder.h"
#include "train/stop_signals.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::TempFolder;

// Whether two weights files hold the same tensors, bit for bit.
::testing::AssertionResult same_weights(const std::string& a_path, const std::string& b_path) {
  const safetensors::Loaded a = safetensors::load(a_path), b = safetensors::load(b_path);
  if (a.tensors.size() != b.tensors.size()) return ::testing::AssertionFailure() << "tensor counts differ";
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    if (a.tensors[i].first != b.tensors[i].first)
      return ::testing::AssertionFailure() << a.tensors[i].first << " vs " << b.tensors[i].first;
    const auto same = testing::bitwise_equal(a.tensors[i].second, b.tensors[i].second);
    if (!same) return ::testing::AssertionFailure() << a.tensors[i].first << ": " << same.message();
  }
  return ::testing::AssertionSuccess();
}

TEST(StopSignals, TheFirstSignalIsRecordedAndTheSecondStopsAtOnce) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const train::StopSignals signals;
    ::raise(SIGUSR1);
    if (train::stop_signal() != SIGUSR1) std::_Exit(3);
    ::raise(SIGUSR1);  // the default action: the process ends here
    std::_Exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status)) << "exited with code " << WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGUSR1);
  }
}

TEST(StopSignals, TheHandlersThereWereComeBackWhenTheLastOneGoes) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &before), 0);
  {
    const train::StopSignals outer;
    {
      const train::StopSignals inner;  // runs in one process may overlap
    }
    struct sigaction during {};
    ::sigaction(SIGTERM, nullptr, &during);
    EXPECT_NE(during.sa_handler, before.sa_handler) << "the inner one's end removed the outer one's handler";
  }
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  train::clear_stop_request();
}

// The training split, asking the run to stop (as a signal would) when sample number `at`
// (counting every read) is read: a moment in the run fixed without a clock (no loader
// threads, so reads follow the loop).
class StopsAtRead final : public data::Dataset {
 public:
  StopsAtRead(std::shared_ptr<const data::Dataset> base, int64_t at) : base_(std::move(base)), at_(at) {}
  int64_t size() const override { return base_->size(); }
  data::Sample get(int64_t index) const override {
    if (reads_++ == at_) train::request_stop(SIGTERM);
    return base_->get(index);
  }
  std::string name() const override { return base_->name(); }

 private:
  std::shared_ptr<const data::Dataset> base_;
  int64_t at_;
  mutable std::atomic<int64_t> reads_{0};
};

struct StopCase {
  const char* moment;
  int64_t read;        // the sample read that asks to stop (32 per epoch, 4 batches of 8)
  int64_t accumulate;  // micro-batches per optimizer step
};

TEST(StopSignals, ARunStoppedAtAnyMomentResumesToTheSameWeights) {
  for (const StopCase& c : {StopCase{"in epoch 1, batch 2", 10, 1}, StopCase{"on epoch 1's last batch", 30, 1},
                            StopCase{"in epoch 2", 45, 1}, StopCase{"between micro-batches of a step", 2, 2}}) {
    SCOPED_TRACE(c.moment);
    TempFolder folder;
    train::TrainConfig config = testing::tiny_run_config(folder.file("whole"));
    config.epochs = 3;
    config.accumulate = c.accumulate;
    const train::TrainData data = train::make_train_data(config);
    testing::run_tiny(config, &data);

    train::TrainConfig stopped = config;
    stopped.out = folder.file("stopped");
    train::TrainData stopping = data;
    stopping.train = std::make_shared<StopsAtRead>(data.train, c.read);
    const testing::TinyRun first = testing::run_tiny(stopped, &stopping);
    train::clear_stop_request();
    EXPECT_EQ(first.summary.stopped, "signal");
    EXPECT_EQ(first.summary.stopped_by, SIGTERM);
    EXPECT_NE(first.output.find("stopped by SIGTERM: "), std::string::npos) << first.output;
    EXPECT_NE(first.output.find("Continue with the same command and --resume auto."), std::string::npos);
    EXPECT_FALSE(fs::exists(folder.file("stopped/summary.json")));  // a run that has not finished
    const std::vector<std::string> checkpoints = train::RunFolder(stopped.out).checkpoints();
    ASSERT_FALSE(checkpoints.empty());
    EXPECT_NE(first.output.find("its checkpoint is " + checkpoints.back()), std::string::npos) << first.output;
    // A stop waits for the optimizer step's end: never inside an accumulated step.
    const std::string name = fs::path(checkpoints.back()).filename().string();
    const size_t batch_at = name.find("-batch-");
    if (batch_at != std::string::npos) {
      EXPECT_EQ(std::stoll(name.substr(batch_at + 7)) % c.accumulate, 0) << name;
    }

    stopped.resume = "auto";
    const testing::TinyRun second = testing::run_tiny(stopped, &data);
    EXPECT_EQ(second.summary.stopped, "completed");
    EXPECT_TRUE(same_weights(folder.file("stopped/final.safetensors"), folder.file("whole/final.safetensors")));
    EXPECT_TRUE(same_weights(folder.file("stopped/best.safetensors"), folder.file("whole/best.safetensors")));
  }
}

TEST(StopSignals, AStopInTheMiddleOfAnEpochLeavesAMidEpochCheckpoint) {
  TempFolder folder;
  train::TrainConfig config = testing::tiny_run_config(folder.file("run"));
  config.epochs = 2;
  const train::TrainData data = train::make_train_data(config);
  train::TrainData stopping = data;
  stopping.train = std::make_shared<StopsAtRead>(data.train, 10);
  const testing::TinyRun run = testing::run_tiny(config, &stopping);
  train::clear_stop_request();
  const std::vector<std::string> checkpoints = train::RunFolder(config.out).checkpoints();
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_NE(checkpoints[0].find("epoch-0001-batch-"), std::string::npos) << checkpoints[0];
  EXPECT_NE(run.output.find("stopped by SIGTERM: epoch 1 after its batch "), std::string::npos) << run.output;
}

// ---- as processes -----------------------------------------------------------------------

// A run of about a second on one core after it prints "run folder:" (when the test signals
// it), so the signal lands in the middle of it even on a loaded machine.
std::vector<std::string> tiny_command(const std::string& out) {
  return {"train", "--size", "12", "--synthetic-samples", "160", "--model", "resnet10", "--width", "0.0625",
          "--batch-size", "4", "--epochs", "6", "--workers", "0", "--device", "cpu", "--log-every", "1",
          "--out", out};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<std::string> kiln(const std::vector<std::string>& args) { return with({KILN_CLI}, args); }

// `args` run to its end (exit 0).
void run_to_the_end(const std::vector<std::string>& args) {
  testing::ChildProcess child(args);
  const int status = child.wait_for_exit(300s);
  ASSERT_EQ(testing::exit_code_of(status), 0) << child.output();
}

TEST(StopSignals, KilnTrainSentSigtermExits143AndResumesToTheSameWeights) {
  TempFolder folder;
  run_to_the_end(kiln(tiny_command(folder.file("whole"))));
  {
    testing::ChildProcess train(kiln(tiny_command(folder.file("stopped"))));
    ASSERT_TRUE(train.wait_for_output("run folder:", 120s)) << train.output();
    train.signal(SIGTERM);
    const int status = train.wait_for_exit(120s);
    ASSERT_EQ(testing::exit_code_of(status), 143) << train.output();
    EXPECT_TRUE(WIFEXITED(status)) << "it was killed instead of stopping";
    EXPECT_NE(train.output().find("kiln: stopping after this step"), std::string::npos) << train.output();
    EXPECT_NE(train.output().find("stopped by SIGTERM"), std::string::npos) << train.output();
  }
  EXPECT_FALSE(train::RunFolder(folder.file("stopped")).checkpoints().empty());
  run_to_the_end(kiln(with(tiny_command(folder.file("stopped")), {"--resume", "auto"})));
  EXPECT_TRUE(same_weights(folder.file("stopped/final.safetensors"), folder.file("whole/final.safetensors")));
}

TEST(StopSignals, KilnLaunchPassesTheSignalOnAndTheRanksStopAtOneStep) {
  TempFolder folder;
  const auto launch = [&](const std::string& out, const std::vector<std::string>& more) {
    return kiln(with(with({"launch", "--nproc-per-node", "2", "--master-port", std::to_string(testing::free_port()),
                           KILN_CLI},
                          tiny_command(out)),
                     with({"--ddp"}, more)));
  };
  run_to_the_end(launch(folder.file("whole"), {}));
  {
    testing::ChildProcess job(launch(folder.file("stopped"), {}));
    ASSERT_TRUE(job.wait_for_output("[rank 0] run folder:", 120s)) << job.output();
    job.signal(SIGTERM);
    const int status = job.wait_for_exit(120s);
    ASSERT_EQ(testing::exit_code_of(status), 143) << job.output();
    EXPECT_NE(job.output().find("[rank 0] stopped by SIGTERM"), std::string::npos) << job.output();
    EXPECT_NE(job.output().find("the ranks stopped for the SIGTERM passed on to them"), std::string::npos)
        << job.output();
    EXPECT_EQ(job.output().find("the other ranks were stopped"), std::string::npos) << job.output();
  }
  run_to_the_end(launch(folder.file("stopped"), {"--resume", "auto"}));
  EXPECT_TRUE(same_weights(folder.file("stopped/final.safetensors"), folder.file("whole/final.safetensors")));
}

}  // namespace
}  // namespace kiln
