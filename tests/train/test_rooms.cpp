// The trainer's rooms keep no list that another must match by hand: each choice's names
// are one table (train/choices.h) that parsing, config.json and --help share; the run
// folder's files are kRunFiles (train/run_folder.h); a checkpoint's progress is one field
// list both ways (train/run_progress.h) and its parts one table (train/checkpoint.h); the
// epoch table's header and rows are one list (train/run_logs.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/text_file.h"
#include "tests/test_util.h"
#include "tools/cli.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/run_folder.h"
#include "train/run_logs.h"
#include "train/run_progress.h"
#include "train/schedule.h"

namespace kiln {
namespace {

using namespace train;

template <typename E>
void expect_round_trip() {
  for (const ChoiceRow<E>& row : choice_table(E{}).rows) {
    EXPECT_EQ(parse_choice<E>(row.name), row.value) << row.name;
    EXPECT_STREQ(choice_name(row.value), row.name);
  }
  EXPECT_KILN_ERROR(parse_choice<E>("no such choice"), "is one of " + choice_list<E>(), "'no such choice'");
}

TEST(Choices, EveryTableRoundTripsAndRefusesOtherNames) {
  expect_round_trip<Optimizer>();
  expect_round_trip<Scheduler>();
  expect_round_trip<LossChoice>();
  expect_round_trip<Monitor>();
  expect_round_trip<LowPrecision>();
  expect_round_trip<DistBackend>();
  expect_round_trip<TaskChoice>();
  expect_round_trip<Orientation>();
  expect_round_trip<optim::CyclicMode>();
  expect_round_trip<OptLevel>();
  EXPECT_EQ(choice_list<Optimizer>(), "sgd, adam, adamw, rmsprop");
  EXPECT_EQ(to_dtype(LowPrecision::BF16, Device::cpu()), DType::BFloat16);
  EXPECT_EQ(to_dtype(LowPrecision::F16, Device::cpu()), DType::Float16);
  // "auto" is torch.autocast's choice for the device: bfloat16 on the CPU, float16 on a GPU.
  EXPECT_EQ(to_dtype(LowPrecision::Auto, Device::cpu()), DType::BFloat16);
  EXPECT_EQ(to_dtype(LowPrecision::Auto, Device::cuda(0)), DType::Float16);
}

// Every field that is a choice is checked by validate() against its table and lists the
// table in --help, so a new choice needs no second list.
TEST(Choices, EveryChoiceFieldIsValidatedAndListedFromItsTable) {
  std::ostringstream help, err;
  ASSERT_EQ(tools::run_kiln({"train", "--help"}, help, err), 0);
  int choice_fields = 0;
  for (const ConfigField& field : config_fields()) {
    if (field.choices == nullptr) continue;
    ++choice_fields;
    const std::string choices = field.choices();
    EXPECT_NE(help.str().find("(" + choices + ")"), std::string::npos) << field.name;
    TrainConfig config;
    update_from_json(config, json::Value::object({{field.name, json::Value::string("bogus")}}), "test");
    EXPECT_KILN_ERROR(validate(config), std::string(field.name) + " is one of " + choices, "'bogus'");
  }
  EXPECT_GE(choice_fields, 10);
}

TEST(Choices, WhichSchedulesAreLaidOutOverTheEpochs) {
  for (const ChoiceRow<Scheduler>& row : kSchedulerRows) {
    const bool laid_out = row.value == Scheduler::OneCycle || row.value == Scheduler::Cosine ||
                          row.value == Scheduler::Linear;
    EXPECT_EQ(schedule_depends_on_epochs(row.value, {30, 60}), laid_out) << row.name;
  }
  EXPECT_TRUE(schedule_depends_on_epochs(Scheduler::MultiStep, {0.5, 0.75}));
  EXPECT_FALSE(schedule_depends_on_epochs(Scheduler::MultiStep, {}));
}

TEST(RunFolder, PathsComeFromTheTableAndClearingRemovesOnlyThoseFiles) {
  testing::TempFolder folder;
  const RunFolder run(folder.file("run"));
  EXPECT_EQ(run.path(RunFile::EpochsCsv), folder.file("run/epochs.csv"));
  EXPECT_EQ(run.path(RunFile::Events), folder.file("run"));
  EXPECT_EQ(run.checkpoint(3, 0), folder.file("run/checkpoints/epoch-0003.safetensors"));
  run.create();
  EXPECT_FALSE(run.holds_run());
  for (const RunFileRow& row : kRunFiles) {
    const std::string name = std::string(row.name) + (row.prefix ? "123.host.kiln" : "");
    if (row.file == RunFile::Checkpoints)
      std::filesystem::create_directories(folder.file("run/" + name));
    else
      std::ofstream(folder.file("run/" + name)) << "x";
  }
  std::ofstream(folder.file("run/notes.txt")) << "mine";
  EXPECT_TRUE(run.holds_run());  // its summary
  run.clear();
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"run"});
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(folder.file("run")))
    left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  // The marker and the lock stay: the folder is still Kiln's (Note [Only Kiln's files]).
  EXPECT_EQ(left, (std::vector<std::string>{".kiln-run.json", ".kiln-run.lock", "notes.txt"}));
}

TEST(RunProgress, OneFieldListWritesAndReadsEveryField) {
  RunProgress progress;
  int64_t value = 1;
  for (const ProgressField& field : progress_fields()) {
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(progress.*member)>;
          progress.*member = std::is_same_v<T, bool> ? T(true) : static_cast<T>(++value);
        },
        field.member);
  }
  const json::Value saved = to_json(progress);
  EXPECT_EQ(saved.as_object().size(), progress_fields().size());
  const RunProgress read = progress_from_json(json::parse(json::dump(saved)), "test");
  EXPECT_EQ(json::dump(to_json(read)), json::dump(saved));
  progress.best_metric = std::nan("");
  EXPECT_TRUE(to_json(progress).find("best_metric")->is(json::Type::Null));
  EXPECT_TRUE(std::isnan(progress_from_json(to_json(progress), "test").best_metric));
  json::Value missing = json::Value::object();
  for (const auto& [key, item] : saved.as_object()) {
    if (key != "step") missing.add(key, item);
  }
  EXPECT_KILN_ERROR(progress_from_json(missing, "ck.safetensors"), "ck.safetensors", "no integer \"step\"");
}

TEST(CheckpointParts, TheWriterAndTheReaderUseOneTable) {
  testing::TempFolder folder;
  StateParts parts;
  for (size_t i = 0; i < parts.size(); ++i) parts[i] = json::Value::integer(static_cast<int64_t>(i));
  const json::Value state = checkpoint_state(parts);
  EXPECT_EQ(state.as_object().size(), parts.size() + 1);  // and "format"
  const std::string path = folder.file("ck.safetensors");
  write_checkpoint({.tensors = {{"model.w", ones({2})}}, .state = state}, path);
  const CheckpointContents read = read_checkpoint(path);
  EXPECT_EQ(state_part(read, StatePart::Logs).as_integer(), 6);
  json::Value without = json::Value::object();
  for (const auto& [key, item] : state.as_object()) {
    if (key != "scaler") without.add(key, item);
  }
  write_checkpoint({.tensors = {}, .state = without}, path);
  EXPECT_KILN_ERROR(read_checkpoint(path), "its state has no \"scaler\"");
}

TEST(RunLogs, TheEpochTableIsOneColumnList) {
  testing::TempFolder folder;
  std::ostringstream out;
  RunLogs logs(out, false, 5, {.running = "acc", .metrics = {"auc", "acc"}});
  TrainConfig config;
  config.tensorboard = false;
  const RunFolder run(folder.path().string());
  logs.open(run, config, nullptr);
  logs.epoch({.epoch = 2, .lr = 0.1, .train_loss = 0.5, .train_running = 0.75, .val_loss = 0.25,
              .val_metrics = {0.875, 0.5}, .seconds = 1.5, .samples_per_s = 10, .loss_scale = 1, .best = true});
  logs.flush();
  EXPECT_EQ(read_text_file(run.path(RunFile::EpochsCsv)),
            "epoch,lr,train/loss,train/acc,val/loss,val/auc,val/acc,seconds,samples_per_s,loss_scale\n"
            "2,0.1,0.5,0.75,0.25,0.875,0.5,1.5,10,1\n");
  EXPECT_EQ(out.str(),
            "epoch 2/5  train loss 0.5000 acc 0.7500  val loss 0.2500 auc 0.8750 acc 0.5000  1.5 s  10.0 samples/s"
            "  (best)\n");
  // An epoch without validation leaves its metrics empty in the table.
  logs.epoch({.epoch = 3, .lr = 0.1, .train_loss = 0.5, .train_running = 0.75});
  logs.flush();
  EXPECT_NE(read_text_file(run.path(RunFile::EpochsCsv)).find("\n3,0.1,0.5,0.75,nan,nan,nan,0,0,1\n"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
