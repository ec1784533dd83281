// RunCheckpoints (train/run_checkpoints.h): Note [Checkpoint layout] written and read, the
// best weights kept, pruning.
#include "train/run_checkpoints.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/time_range.h"
#include "nn/serialize.h"
#include "train/bottleneck.h"
#include "train/checkpoint.h"

namespace kiln::train {
namespace fs = std::filesystem;

nn::StateDict clone_state(const nn::StateDict& state) {
  nn::StateDict copy;
  for (const auto& [name, tensor] : state) copy.emplace_back(name, tensor.clone());
  return copy;
}

RunCheckpoints::RunCheckpoints(const RunContext& run, std::string monitor, ModelInfo model, std::ostream& out)
    : run_(run), monitor_(std::move(monitor)), model_(std::move(model)), out_(out) {}

std::optional<std::string> RunCheckpoints::to_resume() const {
  const std::string& resume = run_.config.resume;
  if (resume.empty()) return std::nullopt;
  if (resume != "auto") {
    KILN_CHECK(fs::exists(resume), "--resume ", resume, ": no such file");
    return resume;
  }
  const std::vector<std::string> checkpoints = run_.folder.checkpoints();
  if (checkpoints.empty()) return std::nullopt;
  return checkpoints.back();
}

std::optional<ResumePoint> RunCheckpoints::prepare_resume() const {
  const std::optional<std::string> path = to_resume();
  if (!path) return std::nullopt;
  ResumePoint from{.path = *path, .contents = read_checkpoint(*path, run_.device), .progress = {}};
  check_same_run(state_part(from.contents, StatePart::Config), run_.config, *path);
  from.progress = progress_from_json(state_part(from.contents, StatePart::Progress), *path);
  KILN_CHECK(from.progress.batch == 0 || from.progress.world_size == run_.distributed.world_size, *path,
             " was taken in the middle of an epoch by ", from.progress.world_size, " ranks; this run has ",
             run_.distributed.world_size, ", whose batches hold other samples (resume from an epoch's end instead)");
  return from;
}

RunProgress RunCheckpoints::resume(ResumePoint from, const RunState& state) {
  const std::string& path = from.path;
  const CheckpointContents& checkpoint = from.contents;
  const auto part = [&](StatePart which) -> const json::Value& { return state_part(checkpoint, which); };
  state.model.load_state_dict(tensors_under(checkpoint.tensors, prefix::kModel));
  state.optimization.load({.tensors = tensors_under(checkpoint.tensors, prefix::kOptimizer),
                           .param_groups = part(StatePart::Optimizer),
                           .source = path},
                          part(StatePart::Scheduler), part(StatePart::Scaler));
  restore_generator_states(part(StatePart::Generators), path);
  RunProgress progress = from.progress;
  progress.world_size = run_.distributed.world_size;
  state.sums.load(tensors_under(checkpoint.tensors, prefix::kRunning));
  restore_best(path, progress, state.model);
  forget_later(path);
  if (run_.writes_files()) state.logs.open(run_.folder, run_.config, &part(StatePart::Logs), progress.step);
  out_ << "resumed from " << path << ": " << progress_point(progress) << "\n";
  return progress;
}

// The best epoch's weights of a resumed run: best.safetensors when it is that epoch's (its
// "epoch" metadata), else the model of that epoch's checkpoint (pruning keeps it); and
// best.safetensors rewritten to match, since a run resumed from an older checkpoint may
// have left a later run's best there.
void RunCheckpoints::restore_best(const std::string& checkpoint, RunProgress& progress, nn::Layer& model) {
  if (progress.best_epoch == 0) return;
  const std::string best_path = run_.folder.path(RunFile::BestWeights);
  if (fs::exists(best_path)) {
    const safetensors::Loaded best = safetensors::load(best_path, run_.device);
    const auto epoch_of = best.metadata.find("epoch");
    if (epoch_of != best.metadata.end() && epoch_of->second == std::to_string(progress.best_epoch)) {
      best_ = best.tensors;
      return;
    }
  }
  const std::string best_checkpoint = run_.folder.checkpoint(progress.best_epoch, 0);
  if (!fs::exists(best_checkpoint)) {
    out_ << "warning: " << checkpoint << ": the weights of its best epoch (" << progress.best_epoch
         << ") are in neither best.safetensors nor " << best_checkpoint
         << "; the test will use the final weights only, unless a later epoch is better\n";
    progress.best_epoch = 0;
    progress.best_metric = std::nan("");
    return;
  }
  best_ = tensors_under(read_checkpoint(best_checkpoint, run_.device).tensors, prefix::kModel);
  if (!run_.distributed.writes()) return;
  const nn::StateDict current = clone_state(model.state_dict());
  model.load_state_dict(best_);
  keep_best(model, progress.best_epoch);
  model.load_state_dict(current);
}

// Resuming from an older checkpoint of this run folder starts a new branch of the run: the
// checkpoints after it belong to the abandoned one (and would be what --resume auto picks).
void RunCheckpoints::forget_later(const std::string& checkpoint) const {
  if (!run_.distributed.writes()) return;
  std::error_code error;
  const fs::path resumed = fs::weakly_canonical(checkpoint, error);
  const std::vector<std::string> paths = run_.folder.checkpoints();
  const auto found = std::find_if(paths.begin(), paths.end(),
                                  [&](const std::string& path) { return fs::weakly_canonical(path, error) == resumed; });
  if (found == paths.end()) return;  // a checkpoint from elsewhere
  for (auto later = found + 1; later != paths.end(); ++later) fs::remove(*later, error);
}

void RunCheckpoints::save(const RunState& state, const RunProgress& progress) {
  if (!run_.writes_files()) return;
  const TimeRange range(phase::kCheckpoint);
  CheckpointContents contents;
  const auto add = [&](const char* owner, const safetensors::NamedTensors& tensors) {
    for (const auto& [name, tensor] : tensors) contents.tensors.emplace_back(owner + name, tensor);
  };
  optim::OptimizerStateDict optimizer = state.optimization.optimizer_state();
  add(prefix::kModel, state.model.state_dict());
  add(prefix::kOptimizer, optimizer.tensors);
  add(prefix::kRunning, state.sums.tensors());
  StateParts parts;
  parts[static_cast<size_t>(StatePart::Config)] = to_json(run_.config);
  parts[static_cast<size_t>(StatePart::Progress)] = to_json(progress);
  parts[static_cast<size_t>(StatePart::Optimizer)] = std::move(optimizer.param_groups);
  parts[static_cast<size_t>(StatePart::Scheduler)] = state.optimization.scheduler_state();
  parts[static_cast<size_t>(StatePart::Scaler)] = state.optimization.scaler_state();
  parts[static_cast<size_t>(StatePart::Generators)] = generator_states();
  parts[static_cast<size_t>(StatePart::Logs)] = state.logs.state();
  contents.state = checkpoint_state(std::move(parts));
  // A mid-epoch checkpoint is named by the epoch in progress; one at an epoch's end by that epoch.
  const int64_t epoch = progress.batch > 0 ? progress.epoch + 1 : progress.epoch;
  const SaveStatus status = write_checkpoint(contents, run_.folder.checkpoint(epoch, progress.batch));
  if (!status.durable) out_ << "warning: " << status.warning << "\n";
  state.logs.flush();
  prune_checkpoints(run_.folder.root(), run_.config.keep_last,
                    progress.best_epoch > 0 ? checkpoint_name(progress.best_epoch, 0) : "");
}

void RunCheckpoints::keep_best(nn::Layer& model, int64_t epoch) {
  if (run_.config.profile_steps > 0) return;
  const TimeRange range(phase::kCheckpoint);
  best_ = clone_state(model.state_dict());
  save_weights(model, RunFile::BestWeights, epoch);
}

void RunCheckpoints::save_final(nn::Layer& model, int64_t epoch) const {
  save_weights(model, RunFile::FinalWeights, epoch);
}

// best.safetensors and final.safetensors: the weights, their epoch, the run's configuration
// (kWeightsConfigKey) and what the model predicts; the best's also the metric that chose them.
void RunCheckpoints::save_weights(nn::Layer& model, RunFile file, int64_t epoch) const {
  if (!run_.distributed.writes()) return;
  std::map<std::string, std::string> metadata = {{"epoch", std::to_string(epoch)},
                                                 {kWeightsConfigKey, json::dump(to_json(run_.config))}};
  if (file == RunFile::BestWeights) metadata.emplace("monitor", monitor_);
  json::Value names = json::Value::array();
  for (const std::string& name : model_.class_names) names.push_back(json::Value::string(name));
  metadata.emplace(kWeightsTaskKey, choice_name(model_.task));
  metadata.emplace(kWeightsClassesKey, json::dump(names));
  metadata.emplace(kWeightsChannelsKey, std::to_string(model_.channels));
  nn::save_weights(model, run_.folder.path(file), metadata);
}

}  // namespace kiln::train
