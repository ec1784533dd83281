// `kiln eval` and `kiln predict`: trained weights on one split of a dataset. The model and
// data are those of the weights' own run when the file carries its configuration
// (best.safetensors and final.safetensors of `kiln train` do, Trainer's kWeightsConfigKey),
// so `kiln eval --weights runs/x/best.safetensors` needs nothing else; flags override it,
// and for other weights files they say what the model is. The weights are loaded strictly:
// a file for another model is an error listing what did not fit.
//
//   kiln eval --weights W [--split test]            ACC, AUC, per-class AUC, confusion matrix
//   kiln predict --weights W --output scores.csv    one row per sample: index, label, scores
//   kiln predict --weights W --output scores.npy    the scores, float32 [N, C] (or [N])

#include "core/error.h"
#include "core/ops.h"
#include "core/safetensors.h"
#include "data/loader.h"
#include "data/medmnist.h"
#include "data/npy.h"
#include "data/prefetcher.h"
#include "nn/load_report.h"
#include "nn/module.h"
#include "tools/cli.h"
#include "tools/config_options.h"
#include "train/csv_log.h"
#include "train/evaluate.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln::tools {
namespace {

// What both commands run: the split's scores under the weights.
struct SplitScores {
  train::TrainData data;
  train::SplitEvaluation evaluation;
};

// Parses the command line over the weights' own configuration; false after --help.
bool parse(const std::vector<std::string>& args, ConfigCommand command, std::string& weights,
           std::string& split, train::TrainConfig& config, std::ostream& out) {
  const std::optional<std::string> path = find_flag_value(args, "--weights");
  if (path && !train::is_pytorch_checkpoint(*path)) {  // only Kiln's own files carry a configuration
    const safetensors::Header header = safetensors::read_header(*path);
    if (const auto found = header.metadata.find(train::kWeightsConfigKey); found != header.metadata.end()) {
      train::update_from_json(config, json::parse(found->second), *path + " (its configuration)");
      config.pretrained.clear();  // the run's starting point; the weights given replace it
    }
  }
  command.extra.insert(command.extra.begin(),
                       {{"--weights", "the weights file (safetensors or PyTorch .pth)", &weights, true},
                        {"--split", "train, val or test", &split, false}});
  return parse_config_command(args, command, config, out);
}

SplitScores score_split(const std::string& weights, const std::string& split,
                        const train::TrainConfig& config) {
  const train::Choices choices = train::validate(config);
  SplitScores result{.data = train::make_train_data(config), .evaluation = {}};
  const data::Split which = data::split_from_name(split);
  const std::shared_ptr<const data::Dataset> dataset = which == data::Split::Train ? result.data.train
                                                       : which == data::Split::Val ? result.data.val
                                                                                   : result.data.test;
  const std::shared_ptr<nn::Layer> model = train::make_model(config, result.data).model;
  const nn::LoadStateDictResult loaded =
      nn::load_state_dict_mapped(*model, train::read_weights(weights)).result;
  if (!loaded.ok()) {
    const std::string example = !loaded.missing_keys.empty() ? "missing " + loaded.missing_keys[0]
                                : !loaded.unexpected_keys.empty()
                                    ? "unexpected " + loaded.unexpected_keys[0]
                                    : "a shape differs: " + loaded.mismatched_keys[0].name;
    throw Error("--weights " + weights + " does not fit model " + config.model + ": " +
                std::to_string(loaded.missing_keys.size()) + " keys missing, " +
                std::to_string(loaded.unexpected_keys.size()) + " unexpected, " +
                std::to_string(loaded.mismatched_keys.size()) + " of another shape (" + example +
                "); say which model it is with --model, --width, ...");
  }
  const Device device = train::resolve_device(config.device);
  model->to(device);
  data::DataLoader loader(dataset, {.batch_size = config.batch_size,
                                    .num_workers = config.workers,
                                    .pin_memory = config.pin_memory && device.is_cuda(),
                                    .transform = result.data.eval_transform});
  data::DevicePrefetcher batches(
      loader, device, config.device_prefetch ? data::PrefetchMode::CopyStream : data::PrefetchMode::None);
  const train::Objective objective(train::LossSettings::of(config, choices.loss), result.data.task,
                                   result.data.classes, {}, device);
  const train::AmpProperties amp = train::amp_properties(choices.amp, train::to_dtype(choices.amp_dtype));
  train::amp_cast_model(*model, amp);
  result.evaluation = train::evaluate_split(*model, batches, objective, amp, result.data.task);
  return result;
}

// The scores as a CSV table (train/csv_log.h: one row per sample, index, label(s), scores).
void write_predictions_csv(const train::SplitEvaluation& evaluation, const std::string& path) {
  const Tensor scores = evaluation.scores.dim() == 1 ? evaluation.scores.unsqueeze(1) : evaluation.scores;
  const int64_t n = scores.size(0);
  const Tensor labels = evaluation.labels.reshape({n, -1});
  std::vector<std::string> columns = {"index"};
  for (int64_t l = 0; l < labels.size(1); ++l)
    columns.push_back(labels.size(1) == 1 ? "label" : "label_" + std::to_string(l));
  for (int64_t c = 0; c < scores.size(1); ++c) columns.push_back("score_" + std::to_string(c));
  const std::vector<double> values =
      cat({labels.to(DType::Float64), scores.to(DType::Float64)}, 1).to_vector<double>();
  const size_t width = columns.size() - 1;
  train::CsvLog table(path, columns, std::chrono::hours(1));  // written whole at flush()
  for (int64_t i = 0; i < n; ++i) {
    std::vector<std::pair<std::string, double>> row = {{"index", static_cast<double>(i)}};
    for (size_t c = 0; c < width; ++c)
      row.emplace_back(columns[c + 1], values[static_cast<size_t>(i) * width + c]);
    table.add_row(row);
  }
  table.flush();
}

}  // namespace

int run_eval(const std::vector<std::string>& args, std::ostream& out) {
  std::string weights, split = "test";
  train::TrainConfig config;
  if (!parse(args,
             {.name = "eval",
              .description = "Evaluate trained weights on a split: ACC, AUC, the confusion matrix."},
             weights, split, config, out)) {
    return 0;
  }
  const SplitScores scores = score_split(weights, split, config);
  out << scores.data.description << ", " << split << " split; " << config.model << " from " << weights << "\n"
      << train::format_evaluation(scores.evaluation.metrics, scores.data.task);
  return 0;
}

int run_predict(const std::vector<std::string>& args, std::ostream& out) {
  std::string weights, split = "test", output;
  train::TrainConfig config;
  if (!parse(args,
             {.name = "predict",
              .description = "Write per-sample scores of trained weights on a split to CSV or NPY.",
              .extra = {{"--output", "the file to write: .csv (index, label, scores) or .npy (scores)",
                         &output, true}}},
             weights, split, config, out)) {
    return 0;
  }
  KILN_CHECK(output.ends_with(".csv") || output.ends_with(".npy"), "--output ", output,
             ": the file must end in .csv or .npy");
  const SplitScores scores = score_split(weights, split, config);
  if (output.ends_with(".npy"))
    data::npy::save(scores.evaluation.scores, output);
  else
    write_predictions_csv(scores.evaluation, output);
  out << output << ": scores of " << scores.evaluation.scores.size(0) << " samples (" << split << " split)\n";
  return 0;
}

}  // namespace kiln::tools
