// The Trainer (train/trainer.h) on tiny synthetic runs (12^3 volumes, a ResNet-10 four
// channels wide): the run folder's files and the summary's best-versus-final test results;
// no host sync in the steps between log intervals; exact resume (4 epochs in one run and
// 2 + resume + 2 give bit-identical weights, also from a checkpoint taken mid-epoch);
// a checkpoint of a different run refused with what differs; a fresh run refusing to
// overwrite one; --profile-steps. Every run is under a watchdog (loader threads).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/host_sync.h"
#include "core/json.h"
#include "core/memory_format.h"
#include "core/text_file.h"
#include "data/csv.h"
#include "nn/module.h"
#include "nn/serialize.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln {
namespace {

using namespace train;
using std::chrono::seconds;
using testing::TempFolder;
using testing::with_watchdog;

TrainConfig tiny_config(const std::string& out) {
  TrainConfig config;
  config.dataset = "synthetic";
  config.size = 12;
  config.synthetic_samples = 40;
  config.model = "resnet10";
  config.width = 0.0625;
  config.dropout = 0.2;  // dropout draws from the default generator: resume must restore it
  config.batch_size = 8;
  config.workers = 2;
  config.epochs = 2;
  config.lr = 3e-3;
  config.scheduler = "cyclic";  // stepped per batch: its state must resume too
  config.device = "cpu";
  config.log_every = 2;
  config.seed = 5;
  config.out = out;
  return config;
}

struct RunResult {
  RunSummary summary;
  nn::StateDict weights;
  std::string output;
};

RunResult run(const TrainConfig& config) {
  RunResult result;
  with_watchdog(seconds(300), [&] {
    const TrainData data = make_train_data(config);
    std::ostringstream out;
    Trainer trainer(config, data, make_model(config, data).model, {.out = &out});
    result.summary = trainer.fit();
    result.weights = trainer.model().state_dict();
    result.output = out.str();
  });
  return result;
}

// epochs.csv without its timing columns (seconds, samples/s): "epoch,lr,...,val/acc" per line.
std::vector<std::string> metric_columns(const std::string& csv) {
  std::vector<std::string> lines;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    size_t cut = 0;
    for (int field = 0; field < 7; ++field) cut = line.find(',', cut) + 1;
    lines.push_back(line.substr(0, cut));
  }
  return lines;
}

void expect_same_weights(const nn::StateDict& a, const nn::StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(testing::all_equal(a[i].second, b[i].second)) << a[i].first;
  }
}

TEST(Trainer, ARunLeavesItsLogsAndTestsTheBestAndFinalWeights) {
  TempFolder folder;
  TrainConfig config = tiny_config(folder.file("run"));
  config.epochs = 3;
  config.csv_per_step = true;
  const RunResult r = run(config);
  EXPECT_EQ(r.summary.stopped, "completed");
  EXPECT_EQ(r.summary.epochs, 3);
  EXPECT_EQ(r.summary.steps, 15);  // 40 samples / 8 = 5 steps per epoch
  ASSERT_GE(r.summary.best_epoch, 1);
  ASSERT_EQ(r.summary.test.size(), 2u);
  EXPECT_EQ(r.summary.test[0].weights, "best");
  EXPECT_EQ(r.summary.test[0].epoch, r.summary.best_epoch);
  EXPECT_EQ(r.summary.test[1].weights, "final");
  EXPECT_EQ(r.summary.test[1].epoch, 3);
  EXPECT_EQ(r.summary.test[1].metrics.samples, 10);
  EXPECT_TRUE(std::isnan(r.summary.test[1].threshold));  // three classes: no binary threshold

  const std::filesystem::path dir = folder.file("run");
  for (const char* name :
       {"config.json", "epochs.csv", "steps.csv", "summary.json", "best.safetensors", "final.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / name)) << name;
  }
  // keep-last 2, and the best epoch's when it is older
  const std::vector<std::string> checkpoints = list_checkpoints(dir.string());
  EXPECT_EQ(checkpoints.size(), r.summary.best_epoch < 2 ? 3u : 2u);
  EXPECT_TRUE(checkpoints.back().ends_with("epoch-0003.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoints" / checkpoint_name(r.summary.best_epoch, 0)));
  const std::string epochs = read_text_file((dir / "epochs.csv").string());
  EXPECT_EQ(std::count(epochs.begin(), epochs.end(), '\n'), 4) << epochs;  // header + 3 epochs
  const json::Value summary = json::parse(read_text_file((dir / "summary.json").string()));
  EXPECT_EQ(summary.find("best_epoch")->as_integer(), r.summary.best_epoch);
  EXPECT_EQ(summary.find("config")->find("model")->as_string(), "resnet10");
  EXPECT_EQ(summary.find("test")->as_array().size(), 2u);
  EXPECT_NE(summary.find("time")->find("phases")->find("forward"), nullptr);
  const json::Value saved_config = json::parse(read_text_file((dir / "config.json").string()));
  EXPECT_EQ(saved_config.find("batch-size")->as_integer(), 8);
  bool has_events = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    has_events |= entry.path().filename().string().starts_with("events.out.tfevents.");
  EXPECT_TRUE(has_events);
  EXPECT_NE(r.output.find("where the time went"), std::string::npos) << r.output;

  // The test result with the best weights is the best weights' own: best.safetensors in a
  // fresh model scores the same on the test split.
  const TrainData data = make_train_data(config);
  auto model = make_model(config, data).model;
  nn::load_weights(*model, (dir / "best.safetensors").string());
  data::DataLoader loader(data.test, {.batch_size = 3, .transform = data.eval_transform});
  data::DevicePrefetcher batches(loader, Device::cpu());
  const Objective objective(config, data.task, data.classes, {}, Device::cpu());
  const SplitEvaluation best =
      evaluate_split(*model, batches, objective, amp_properties(OptLevel::O0), data.task);
  EXPECT_EQ(best.metrics.auc, r.summary.test[0].metrics.auc);
  EXPECT_EQ(best.metrics.acc, r.summary.test[0].metrics.acc);
}

// Note [A training step]: between log intervals a step reads nothing back.
TEST(Trainer, StepsBetweenLogIntervalsMakeNoHostSync) {
  TempFolder folder;
  TrainConfig config = tiny_config(folder.file("run"));
  config.log_every = 1000;
  config.clip_grad_norm = 1.0;  // clipping on the device, no read-back
  config.amp = "O1";
  config.amp_dtype = "bf16";
  const RunResult quiet = run(config);
  EXPECT_EQ(quiet.summary.quiet_steps, 8);  // 5 steps per epoch; the last of each logs
  EXPECT_EQ(quiet.summary.quiet_step_syncs, 0);

  // The counter sees the reads: logging every step leaves no quiet step, and a step that
  // reads its loss is counted (the check above would catch an item() in the loop).
  config.log_every = 1;
  config.overwrite = true;
  EXPECT_EQ(run(config).summary.quiet_steps, 0);
  const HostSyncs before = host_syncs();
  (void)zeros({}).item<float>();
  EXPECT_EQ((host_syncs() - before).item, 1);
}

// Apex's levels on the CPU: float16 with the dynamic loss scale (O1, O2) and bfloat16
// (O2: the model itself in bfloat16, float32 masters in the optimizer) train, and the
// loss scale is logged for float16.
TEST(Trainer, MixedPrecisionLevelsTrain) {
  for (const auto& [level, dtype] :
       std::vector<std::pair<std::string, std::string>>{{"O1", "f16"}, {"O2", "f16"}, {"O2", "bf16"}}) {
    SCOPED_TRACE(level + " " + dtype);
    TempFolder folder;
    TrainConfig config = tiny_config(folder.file("run"));
    config.amp = level;
    config.amp_dtype = dtype;
    const RunResult r = run(config);
    EXPECT_EQ(r.summary.epochs, 2);
    EXPECT_TRUE(std::isfinite(r.summary.test[1].metrics.auc));
    const data::CsvTable epochs = data::read_csv(folder.file("run/epochs.csv"));
    const std::string scale = epochs.rows[0][static_cast<size_t>(epochs.column("loss_scale"))];
    EXPECT_EQ(scale, dtype == "f16" ? "65536" : "1") << "float16 runs with GradScaler's scale";
    if (level == "O2") {
      EXPECT_EQ(r.weights[0].second.dtype(), dtype == "f16" ? DType::Float16 : DType::BFloat16);
    }
  }
}

// --cuda-graphs on the CPU: one line saying the steps run eagerly, and the very run a run
// without the flag makes (a GPU's graphed run: tests/cuda/test_graphed_step.cpp).
TEST(Trainer, CudaGraphsOnTheCpuSayTheyAreIgnoredAndChangeNothing) {
  TempFolder folder;
  TrainConfig plain = tiny_config(folder.file("plain"));
  plain.epochs = 2;
  TrainConfig graphed = plain;
  graphed.out = folder.file("graphed");
  graphed.cuda_graphs = true;
  const RunResult a = run(plain), b = run(graphed);
  EXPECT_NE(b.output.find("--cuda-graphs is ignored on the CPU"), std::string::npos) << b.output;
  EXPECT_EQ(a.output.find("--cuda-graphs"), std::string::npos);
  EXPECT_EQ(b.output.find("cuda graphs:"), std::string::npos) << "no graph, no graph report";
  expect_same_weights(a.weights, b.weights);
  EXPECT_EQ(metric_columns(read_text_file(folder.file("plain/epochs.csv"))),
            metric_columns(read_text_file(folder.file("graphed/epochs.csv"))));
}

// --channels-last (Note [Channels-last training]): the same training as NCDHW, to float32
// tolerance (the sums run in other orders).
TEST(Trainer, ChannelsLastTrainsAsNcdhwDoes) {
  TempFolder folder;
  TrainConfig plain = tiny_config(folder.file("plain"));
  plain.epochs = 2;
  TrainConfig cl = plain;
  cl.out = folder.file("cl");
  cl.channels_last = true;
  const RunResult a = run(plain), b = run(cl);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  int64_t convolutions = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_TRUE(testing::all_close(b.weights[i].second, a.weights[i].second, {.atol = 1e-5, .rtol = 1e-3}))
        << a.weights[i].first;
    // The flag took effect: the trained convolution weights are channels-last, and only there.
    const Tensor& weight = b.weights[i].second;
    // Where the two layouts are the same bytes (one input channel, a 1x1x1 kernel) either holds.
    if (weight.dim() != 5 || weight.size(1) == 1 || weight.size(2) * weight.size(3) * weight.size(4) == 1)
      continue;
    ++convolutions;
    EXPECT_TRUE(weight.is_contiguous(MemoryFormat::ChannelsLast3d)) << b.weights[i].first;
    EXPECT_FALSE(a.weights[i].second.is_contiguous(MemoryFormat::ChannelsLast3d)) << a.weights[i].first;
  }
  EXPECT_GT(convolutions, 0);
}

// 4 epochs in one run = 2 epochs, then a run resumed from their checkpoint for 2 more.
TEST(Trainer, ResumingGivesBitIdenticalWeights) {
  TempFolder folder;
  TrainConfig whole = tiny_config(folder.file("whole"));
  whole.epochs = 4;
  const RunResult reference = run(whole);

  TrainConfig half = tiny_config(folder.file("halves"));
  half.epochs = 2;
  run(half);
  half.epochs = 4;
  half.resume = "auto";
  const RunResult resumed = run(half);
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos);
  EXPECT_EQ(resumed.summary.steps, reference.summary.steps);
  expect_same_weights(resumed.weights, reference.weights);
  // The table continues where the checkpoint left it: each epoch once, the same numbers
  // (all but the timings).
  EXPECT_EQ(metric_columns(read_text_file(folder.file("halves/epochs.csv"))),
            metric_columns(read_text_file(folder.file("whole/epochs.csv"))));
}

// A checkpoint taken mid-epoch resumes at its batch, with the epoch's running sums.
TEST(Trainer, ResumingFromAMidEpochCheckpointGivesBitIdenticalWeights) {
  TempFolder folder;
  TrainConfig whole = tiny_config(folder.file("whole"));
  whole.epochs = 3;
  const RunResult reference = run(whole);

  TrainConfig first = tiny_config(folder.file("first"));
  first.epochs = 2;
  first.checkpoint_every = 3;  // steps 3 (epoch 1, batch 3) and 6 (epoch 2, batch 1)
  first.keep_last = 100;
  run(first);
  const std::vector<std::string> checkpoints = list_checkpoints(folder.file("first"));
  const auto mid = std::find_if(checkpoints.begin(), checkpoints.end(), [](const std::string& path) {
    return path.ends_with("epoch-0002-batch-000001.safetensors");
  });
  ASSERT_NE(mid, checkpoints.end());
  TrainConfig second = tiny_config(folder.file("second"));
  second.epochs = 3;
  second.checkpoint_every = 3;
  second.resume = *mid;
  const RunResult resumed = run(second);
  expect_same_weights(resumed.weights, reference.weights);
}

// Resuming from an older checkpoint of the folder starts a branch: the later checkpoints
// go (--resume auto must not pick the abandoned branch), the best weights are the resumed
// run's own, and the branch retraces the original bit for bit.
TEST(Trainer, ResumingFromAnOlderCheckpointStartsABranch) {
  TempFolder folder;
  TrainConfig config = tiny_config(folder.file("run"));
  config.epochs = 3;
  config.keep_last = 100;
  const RunResult original = run(config);
  config.resume = folder.file("run/checkpoints/epoch-0001.safetensors");
  const RunResult branch = run(config);
  expect_same_weights(branch.weights, original.weights);
  EXPECT_EQ(list_checkpoints(folder.file("run")).size(), 3u);
  EXPECT_EQ(branch.summary.best_epoch, original.summary.best_epoch);
  EXPECT_EQ(branch.summary.test[0].metrics.auc, original.summary.test[0].metrics.auc);
}

// A run stopped by patience stays stopped when resumed; a run that died before its first
// checkpoint is started afresh by --resume auto.
TEST(Trainer, EarlyStoppingSurvivesAResumeAndAnEmptyRunStartsAfresh) {
  TempFolder folder;
  TrainConfig config = tiny_config(folder.file("run"));
  config.epochs = 6;
  config.lr = 1e-12;  // nothing learns: the validation accuracy does not improve
  config.scheduler = "none";
  config.monitor = "acc";
  config.patience = 1;
  const RunResult stopped = run(config);
  ASSERT_EQ(stopped.summary.stopped, "early stopping");
  ASSERT_EQ(stopped.summary.epochs, 2);
  config.resume = "auto";
  const RunResult resumed = run(config);
  EXPECT_EQ(resumed.summary.stopped, "early stopping");
  EXPECT_EQ(resumed.summary.epochs, 2);

  TrainConfig died = tiny_config(folder.file("died"));
  std::filesystem::create_directories(folder.file("died"));
  // What a run that died before its first checkpoint leaves: Kiln's marker and a table.
  std::ofstream(folder.file("died/.kiln-run.json")) << "{\"kiln_run\": 1}\n";
  std::ofstream(folder.file("died/epochs.csv")) << "epoch,lr\n";
  died.resume = "auto";
  EXPECT_EQ(run(died).summary.epochs, 2);
}

TEST(Trainer, ACheckpointOfADifferentRunIsRefusedSayingWhatDiffers) {
  TempFolder folder;
  TrainConfig config = tiny_config(folder.file("run"));
  config.epochs = 1;
  run(config);
  TrainConfig other = config;
  other.width = 0.125;
  other.lr = 1e-2;
  other.epochs = 2;  // may change
  other.resume = "auto";
  EXPECT_KILN_ERROR(run(other), "is a checkpoint of a different run",
                    "width: the checkpoint has 0.0625, this run 0.125",
                    "lr: the checkpoint has 0.003, this run 0.01");
  EXPECT_KILN_ERROR(read_checkpoint(folder.file("run/best.safetensors")), "not a Kiln training checkpoint");
}

TEST(Trainer, ANewRunDoesNotReplaceAnOldOneUnlessAsked) {
  TempFolder folder;
  TrainConfig config = tiny_config(folder.file("run"));
  config.epochs = 1;
  run(config);
  EXPECT_KILN_ERROR(run(config), "already holds a run", "--resume auto", "--overwrite");
  config.overwrite = true;
  EXPECT_EQ(run(config).summary.epochs, 1);
}

TEST(Trainer, ProfileStepsRunsThatManyStepsAndReports) {
  TempFolder folder;
  TrainConfig config = tiny_config(folder.file("run"));
  config.profile_steps = 2;
  config.accumulate = 2;
  const RunResult r = run(config);
  EXPECT_EQ(r.summary.stopped, "profile");
  // Note [Steps and batches]: 2 optimizer steps are 4 batches when 2 accumulate into a step.
  EXPECT_EQ(r.summary.steps, 2);
  EXPECT_EQ(r.summary.report.batches, 4);
  EXPECT_TRUE(r.summary.test.empty());
  double forward = 0;
  for (const PhaseTime& p : r.summary.report.phases) {
    if (p.phase == "forward") forward = p.seconds;
  }
  EXPECT_GT(forward, 0);
  EXPECT_FALSE(std::filesystem::exists(folder.file("run")));  // a profile writes nothing
}

}  // namespace
}  // namespace kiln
