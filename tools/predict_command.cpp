// `kiln predict`: a trained model's predictions, in two forms.
//
//   kiln predict RUN --input FILE|FOLDER|CSV --out predictions.csv [--weights best|final|FILE]
//       new scans: a volume file, every volume file under a folder, or the image columns of
//       a manifest, preprocessed exactly as the run's training data was (train/
//       preprocessing.h); one row per scan: its file, the predicted class and each class's
//       probability (or each label's, or the regressed values), columns named by the run's
//       classes (tools/trained_model.h reads them from the weights)
//   kiln predict --weights W --output scores.csv|.npy [--split test] [FLAGS]
//       a split of the run's own data: index, label(s) and scores (or the scores as .npy)
#include <algorithm>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/text_list.h"
#include "core/ops.h"
#include "data/csv.h"
#include "data/loader.h"
#include "data/npy.h"
#include "data/prefetcher.h"
#include "data/scan_dataset.h"
#include "data/scan_list.h"
#include "data/volume_file.h"
#include "tools/cli.h"
#include "tools/config_options.h"
#include "tools/split_scores.h"
#include "tools/trained_model.h"
#include "train/csv_log.h"
#include "train/data_setup.h"
#include "train/run_folder.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

// ---- new scans --------------------------------------------------------------------------

// RUN's weights: those --weights names (best, final or a file), else best.safetensors,
// else (a run whose validation never gave a best epoch) final.safetensors, said so.
std::string run_weights(const std::string& run, const std::optional<std::string>& which, std::ostream& out) {
  const train::RunFolder folder(run);
  std::error_code error;
  const std::string best = folder.path(train::RunFile::BestWeights), final = folder.path(train::RunFile::FinalWeights);
  if (which && *which != "best" && *which != "final") return *which;  // a file
  if (which) {
    const std::string& path = *which == "best" ? best : final;
    KILN_CHECK(fs::exists(path, error), "predict: ", run, " holds no ", *which, ".safetensors");
    return path;
  }
  if (fs::exists(best, error)) return best;
  KILN_CHECK(fs::exists(final, error), "predict: ", run, " holds neither best.safetensors nor final.safetensors (is it a "
             "kiln train run folder?)");
  out << run << " has no best.safetensors (no validation improved); predicting with final.safetensors\n";
  return final;
}

// The folder a file will be written to exists (an error naming it, before any work).
void check_folder_of(const std::string& output) {
  const fs::path folder = fs::path(output).parent_path();
  std::error_code error;
  KILN_CHECK(folder.empty() || fs::is_directory(folder, error), "predict: the folder of ", output, " (",
             folder.string(), ") does not exist");
}

// Where predictions may go: not over the input, not over a file of the run's own, and not
// over an existing file unless --overwrite.
void check_output(const std::string& output, const std::string& input, const std::string& run, bool overwrite) {
  KILN_CHECK(output.ends_with(".csv"), "predict: --out ", output, ": the file must end in .csv");
  check_folder_of(output);
  std::error_code error;
  const fs::path target = fs::weakly_canonical(output, error);
  KILN_CHECK(target != fs::weakly_canonical(input, error), "predict: --out ", output, " is the --input itself");
  for (const train::RunFileRow& row : train::kRunFiles) {
    KILN_CHECK(row.prefix || target != fs::weakly_canonical(train::RunFolder(run).path(row.file), error),
               "predict: --out ", output, " is the run's own ", row.name);
  }
  KILN_CHECK(overwrite || !fs::exists(output, error), "predict: --out ", output,
             " already exists; give --overwrite to replace it");
}

// Each input's channels are the model's: an error naming the first file that differs.
void check_channels(const std::vector<std::vector<std::string>>& scans, const train::ModelInfo& info,
                    const train::Choices& choices) {
  for (const std::vector<std::string>& files : scans) {
    int64_t channels = 0;
    for (const std::string& file : files)
      channels += data::read_volume_info(file, {.reorient_to_ras = choices.preprocessing.loading.reorient_to_ras}).shape[0];
    KILN_CHECK(channels == info.channels, "predict: ", files.front(), " has ", channels, " channel",
               channels == 1 ? "" : "s", "; the model takes ", info.channels);
  }
}

// The scans to predict: one file, every volume file under a folder (sorted), or the image
// columns of a manifest's rows.
std::vector<std::vector<std::string>> input_scans(const std::string& input, const train::TrainConfig& config) {
  std::error_code error;
  std::vector<std::vector<std::string>> scans;
  if (fs::is_directory(input, error)) {
    for (fs::recursive_directory_iterator it(input, error), end; !error && it != end; it.increment(error)) {
      if (it->is_regular_file(error) && data::is_volume_file(it->path().string())) scans.push_back({it->path().string()});
    }
    KILN_CHECK(!error, "predict: cannot list ", input, ": ", error.message());
    std::sort(scans.begin(), scans.end());
  } else if (input.ends_with(".csv")) {
    const data::ScanList list = data::read_scan_list(
        input, {.image_columns = split_names(config.image_columns), .with_labels = false});
    if (!list.problems.empty()) throw Error("predict: " + list.problems.front());
    for (const data::ScanRecord& record : list.records) scans.push_back(record.images);
  } else {
    KILN_CHECK(data::is_volume_file(input) && fs::exists(input, error), "predict: --input ", input,
               " is neither a volume file (.nii, .nii.gz, .npy, .npz), a folder nor a CSV manifest");
    scans.push_back({input});
  }
  KILN_CHECK(!scans.empty(), "predict: --input ", input, " holds no volume file");
  return scans;
}

// The table: one row per scan, "image", then "predicted" and a column per class (or label,
// or target).
std::string prediction_table(const std::vector<std::vector<std::string>>& scans, const Tensor& scores,
                             const train::ModelInfo& info) {
  const bool classes = info.task == train::Task::Binary || info.task == train::Task::MultiClass;
  const Tensor table = scores.dim() == 1 ? stack({neg(sub(scores, 1.0)), scores}, 1) : scores;  // bce: P(class 1)
  const std::vector<double> values = table.to(DType::Float64).contiguous().to_vector<double>();
  const auto width = static_cast<size_t>(table.size(1));
  std::string text = "image";
  if (classes) text += ",predicted";
  for (size_t c = 0; c < width; ++c) {
    text += ',';  // (appended apart: GCC 12 warns, wrongly, of an overlap in "," + name)
    text += data::csv_field(c < info.class_names.size() ? info.class_names[c] : "output_" + std::to_string(c));
  }
  text += "\n";
  for (size_t i = 0; i < scans.size(); ++i) {
    const double* row = values.data() + i * width;
    text += data::csv_field(scans[i].front());
    if (classes) {
      text += ',';
      text += data::csv_field(info.class_names.at(static_cast<size_t>(std::max_element(row, row + width) - row)));
    }
    for (size_t c = 0; c < width; ++c) {
      char number[32];
      std::snprintf(number, sizeof number, "%.9g", row[c]);
      text += std::string(",") + number;
    }
    text += "\n";
  }
  return text;
}

int predict_scans(const std::vector<std::string>& args, std::ostream& out) {
  const std::string run = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string weights = run_weights(run, find_flag_value(rest, "--weights"), out);
  const std::optional<std::string> output = find_flag_value(rest, "--out");
  train::TrainConfig config;
  read_weights_config(weights, config);
  config.overwrite = false;  // the training run's; predict's own --overwrite is about --out
  std::string input, weights_flag;
  if (!parse_config_command(
          rest,
          {.name = "predict",
           .description = "Predict new scans with a run's model, preprocessed as its training data was.",
           .extra = {{"--input", "a volume file, a folder of them, or a CSV manifest (its image columns)", &input, true},
                     {"--weights", "best, final, or a weights file (default: best, else final)", &weights_flag,
                      false}}},
          config, out)) {
    return 0;
  }
  if (!output) throw UsageError("predict RUN needs --out predictions.csv");
  check_output(*output, input, run, config.overwrite);
  const train::Choices choices = train::validate(config);
  const train::ModelInfo info = read_model_info(weights);
  const std::vector<std::vector<std::string>> scans = input_scans(input, config);
  check_channels(scans, info, choices);
  std::vector<data::ScanSample> samples;
  for (const std::vector<std::string>& files : scans) samples.push_back({.images = files, .label = zeros({})});
  const auto dataset = std::make_shared<data::ScanDataset>(
      std::move(samples), data::ScanDatasetOptions{.loading = choices.preprocessing.loading, .name = "predict " + input});
  TrainedModel trained = load_trained_model(weights, config, choices, info);
  data::DataLoader loader(dataset, {.batch_size = config.batch_size,
                                    .num_workers = config.workers,
                                    .pin_memory = config.pin_memory && trained.device.is_cuda(),
                                    .transform = train::eval_transform_of(config, choices)});
  data::DevicePrefetcher batches(loader, trained.device);
  const Tensor scores = train::predict_scores(*trained.model, batches, *trained.objective, trained.amp);
  save_atomically(prediction_table(scans, scores, info), *output, "kiln predict");
  out << *output << ": predictions of " << scans.size() << " scan" << (scans.size() == 1 ? "" : "s") << " by "
      << weights << "\n";
  return 0;
}

// ---- a split of the run's data ----------------------------------------------------------

// The scores as a CSV table (train/csv_log.h: one row per sample, index, label(s), scores).
void write_split_csv(const train::SplitEvaluation& evaluation, const std::string& path) {
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

int predict_split(const std::vector<std::string>& args, std::ostream& out) {
  std::string weights, split = "test", output;
  train::TrainConfig config;
  if (!parse_weights_command(args,
                             {.name = "predict",
                              .description = "Write per-sample scores of trained weights on a split to CSV or NPY "
                                             "(kiln predict RUN --input ... predicts new scans).",
                              .extra = {{"--output", "the file to write: .csv (index, label, scores) or .npy (scores)",
                                         &output, true}}},
                             weights, split, config, out)) {
    return 0;
  }
  KILN_CHECK(output.ends_with(".csv") || output.ends_with(".npy"), "--output ", output,
             ": the file must end in .csv or .npy");
  check_folder_of(output);  // before the scoring, not after
  const SplitScores scores = score_split(weights, split, config);
  if (output.ends_with(".npy"))
    data::npy::save(scores.evaluation.scores, output);
  else
    write_split_csv(scores.evaluation, output);
  out << output << ": scores of " << scores.evaluation.scores.size(0) << " samples (" << split << " split)\n";
  return 0;
}

}  // namespace

int run_predict(const std::vector<std::string>& args, std::ostream& out) {
  const bool new_scans = !args.empty() && !args[0].starts_with("-");
  return new_scans ? predict_scans(args, out) : predict_split(args, out);
}

}  // namespace kiln::tools
