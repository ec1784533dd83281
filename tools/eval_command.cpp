// `kiln eval`: trained weights on one split of their run's data. The model and data are
// those of the weights' own run when the file carries its configuration (tools/
// trained_model.h), so `kiln eval --weights runs/x/best.safetensors` needs nothing else;
// flags override it, and for other weights files they say what the model is. One's own
// scans are split as the run split them (its split.csv, beside the weights: Note [Scan
// splits] in train/scans.h).
//
//   kiln eval --weights W [--split test]     ACC, AUC, per-class AUC, confusion matrix (or MAE, RMSE, R2)
#include <filesystem>

#include "core/error.h"
#include "data/loader.h"
#include "data/medmnist.h"
#include "data/prefetcher.h"
#include "tools/cli.h"
#include "tools/config_options.h"
#include "tools/split_scores.h"
#include "tools/trained_model.h"
#include "train/evaluate.h"
#include "train/run_folder.h"
#include "train/scans.h"

namespace kiln::tools {

bool parse_weights_command(const std::vector<std::string>& args, ConfigCommand command, std::string& weights,
                           std::string& split, train::TrainConfig& config, std::ostream& out) {
  std::optional<train::TrainConfig> trained;  // the configuration the weights carry, if they do
  if (const std::optional<std::string> path = find_flag_value(args, "--weights")) {
    if (read_weights_config(*path, config)) trained = config;
  }
  command.extra.insert(command.extra.begin(),
                       {{"--weights", "the weights file (safetensors, a training checkpoint, or PyTorch .pth)",
                         &weights, true},
                        {"--split", "train, val or test", &split, false}});
  if (!parse_config_command(args, command, config, out)) return false;
  // Weights scored on data other than their run's (another size, dataset or preprocessing)
  // give numbers about that data, usually near chance: say which settings differ.
  if (trained) {
    for (const train::ConfigField& field : train::config_fields()) {
      if (!field.identity || std::string(field.group) != "data") continue;
      const std::string was = train::field_text(*trained, field), now = train::field_text(config, field);
      if (was != now)
        out << "warning: the weights were trained with --" << field.name << " " << was << "; this evaluation uses "
            << now << "\n";
    }
  }
  return true;
}

SplitScores score_split(const std::string& weights, const std::string& split, const train::TrainConfig& config) {
  KILN_CHECK(split == "train" || split == "val" || split == "test", "--split is train, val or test, got '", split, "'");
  const train::Choices choices = train::validate(config);
  namespace fs = std::filesystem;
  const fs::path saved = fs::path(weights).parent_path() / train::kRunFiles[static_cast<size_t>(train::RunFile::Split)].name;
  std::error_code error;
  SplitScores result{.data = train::make_train_data(config, choices, fs::exists(saved, error) ? saved.string() : ""),
                     .evaluation = {}};
  const data::Split which = data::split_from_name(split);
  const std::shared_ptr<const data::Dataset> dataset = which == data::Split::Train ? result.data.train
                                                       : which == data::Split::Val ? result.data.val
                                                                                   : result.data.test;
  TrainedModel trained = load_trained_model(weights, config, choices,
                                            {.task = result.data.task,
                                             .classes = result.data.classes,
                                             .channels = result.data.channels,
                                             .class_names = result.data.class_names});
  data::DataLoader loader(dataset, {.batch_size = config.batch_size,
                                    .num_workers = config.workers,
                                    .pin_memory = config.pin_memory && trained.device.is_cuda(),
                                    .transform = result.data.eval_transform});
  data::DevicePrefetcher batches(loader, trained.device,
                                 config.device_prefetch ? data::PrefetchMode::CopyStream : data::PrefetchMode::None);
  result.evaluation = train::evaluate_split(*trained.model, batches, *trained.objective, trained.amp, result.data.task);
  return result;
}

int run_eval(const std::vector<std::string>& args, std::ostream& out) {
  std::string weights, split = "test";
  train::TrainConfig config;
  if (!parse_weights_command(
          args, {.name = "eval", .description = "Evaluate trained weights on a split: ACC, AUC, the confusion matrix."},
          weights, split, config, out)) {
    return 0;
  }
  const SplitScores scores = score_split(weights, split, config);
  out << scores.data.description << ", " << split << " split; " << config.model << " from " << weights << "\n"
      << train::format_evaluation(scores.evaluation.metrics, scores.data.task);
  return 0;
}

}  // namespace kiln::tools
