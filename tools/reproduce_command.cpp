// `kiln reproduce medmnist --datasets adrenal,vessel --size 28 --seeds 3 [FLAGS]`: a recipe
// run on several datasets with several seeds, then the test ACC and AUC of each dataset as
// mean ± sample standard deviation over the seeds, laid out as MedMNIST's benchmark table
// (a row per method, an AUC and an ACC column per dataset). Two rows: the test split with
// the best validation epoch's weights (what the benchmark means) and with the final
// epoch's (what MedMNIST's script reports: Note [Best and final] in train/trainer.h).
//
// Each run has its folder, OUT/<dataset>-seed<k> (OUT: --out, default runs/reproduce-
// <recipe>). A run whose folder holds a summary.json is not run again, and one that holds
// checkpoints resumes: a reproduction stopped part-way continues where it stopped.
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/text_list.h"
#include "core/json.h"
#include "tools/cli.h"
#include "tools/config_options.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

// "adrenal" -> "adrenalmnist3d"; a full flag or "synthetic" as they are.
std::vector<std::string> dataset_flags(const std::string& list) {
  std::vector<std::string> flags;
  for (const std::string& name : split_names(list)) {
    flags.push_back(name == "synthetic" || name.ends_with("mnist3d") ? name : name + "mnist3d");
  }
  KILN_CHECK(!flags.empty(), "reproduce: --datasets names no dataset");
  return flags;
}

// The run's test metrics [best ACC, best AUC, final ACC, final AUC] from its summary.json.
std::vector<double> test_metrics(const json::Value& summary, const std::string& path) {
  std::vector<double> metrics(4, std::nan(""));
  const json::Value* test = summary.find("test");
  KILN_CHECK(test && test->is(json::Type::Array), path, ": no test results");
  for (const json::Value& result : test->as_array()) {
    const json::Value* weights = result.find("weights");
    const json::Value* found = result.find("metrics");
    KILN_CHECK(weights && weights->is(json::Type::String) && found && found->is(json::Type::Object), path,
               ": a test result without \"weights\" and \"metrics\"");
    const size_t at = weights->as_string() == "best" ? 0 : 2;
    const json::Value& m = *found;
    for (const auto& [offset, key] : {std::pair<size_t, const char*>{0, "acc"}, {1, "auc"}}) {
      const json::Value* value = m.find(key);
      if (value && !value->is(json::Type::Null)) metrics[at + offset] = value->as_number();
    }
  }
  return metrics;
}

// One run, or its earlier summary.
std::vector<double> run_or_reuse(train::RunContext run, std::ostream& out) {
  const std::string summary_path = run.folder.path(train::RunFile::Summary);
  if (fs::exists(summary_path)) {  // reused only when it is this run: the same identity fields
    const json::Value summary = json::parse_file(summary_path);
    const json::Value* config = summary.find("config");
    KILN_CHECK(config != nullptr, summary_path, ": a summary without its run's \"config\"");
    train::check_same_run(*config, run.config, summary_path, "summary");
    out << run.folder.root() << ": done before, its summary.json is used\n";
    return test_metrics(summary, summary_path);
  }
  const train::TrainConfig config = run.config;
  out << "== " << config.dataset << ", seed " << config.seed << " -> " << run.folder.root() << "\n";
  const train::TrainData data = train::make_train_data(config);
  train::Trainer trainer(std::move(run), data, train::make_model(config, data).model, {.out = &out});
  const train::RunSummary summary = trainer.fit();
  out << train::format_summary(summary);
  return test_metrics(to_json(summary, config), summary_path);
}

// `text` padded with spaces to `width` characters (UTF-8: "±" is one character, two bytes).
std::string padded(const std::string& text, size_t width) {
  size_t characters = 0;
  for (const char c : text) characters += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return text + std::string(width > characters ? width - characters : 0, ' ');
}

}  // namespace

std::string mean_and_sd(const std::vector<double>& values) {
  double sum = 0;
  for (const double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (const double v : values) squares += (v - mean) * (v - mean);
  char text[48];
  if (values.size() < 2) {
    std::snprintf(text, sizeof text, "%.3f", mean);
  } else {
    std::snprintf(text, sizeof text, "%.3f±%.3f", mean,
                  std::sqrt(squares / static_cast<double>(values.size() - 1)));
  }
  return text;
}

std::string format_reproduce_table(const std::string& method, const std::vector<std::string>& datasets,
                                   const std::vector<std::vector<std::vector<double>>>& metrics) {
  constexpr size_t kMethod = 34, kCell = 14;
  std::string table = padded("Methods", kMethod);
  for (const std::string& dataset : datasets) table += padded(dataset, 2 * kCell);
  table += "\n" + std::string(kMethod, ' ');
  for (size_t d = 0; d < datasets.size(); ++d) table += padded("AUC", kCell) + padded("ACC", kCell);
  table += "\n";
  for (const auto& [label, offset] :
       {std::pair<std::string, size_t>{method + " (best val AUC)", 0}, {method + " (final epoch)", 2}}) {
    table += padded(label, kMethod);
    for (const std::vector<std::vector<double>>& runs : metrics) {
      std::vector<double> auc, acc;
      for (const std::vector<double>& run : runs) {
        acc.push_back(run[offset]);
        auc.push_back(run[offset + 1]);
      }
      table += padded(mean_and_sd(auc), kCell) + padded(mean_and_sd(acc), kCell);
    }
    table += "\n";
  }
  return table;
}

int run_reproduce(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty() || args[0].starts_with("-")) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      out << "usage: kiln reproduce RECIPE --datasets NAMES [--seeds N] [FLAGS of kiln train]\n"
             "  RECIPE: medmnist; NAMES: adrenal,vessel,... (MedMNIST 3D flags, short or full)\n"
             "  kiln reproduce medmnist --help lists every flag of kiln train it also takes\n";
      return 0;
    }
    throw UsageError("reproduce needs a RECIPE (medmnist)");
  }
  train::TrainConfig config;
  train::apply_recipe(args[0], config);
  std::string datasets, seeds = "3";
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (!parse_config_command(
          rest,
          {.name = "reproduce",
           .description = "Run a recipe over datasets and seeds; test ACC and AUC as mean ± sd.",
           .extra = {{"--datasets", "comma-separated datasets: adrenal,vessel,...", &datasets, true},
                     {"--seeds", "seeds 0 .. N-1 per dataset", &seeds, false}}},
          config, out)) {
    return 0;
  }
  int64_t seed_count = 0;
  try {
    seed_count = std::stoll(seeds);
  } catch (const std::exception&) {
    throw UsageError("--seeds is a number, got '" + seeds + "'");
  }
  if (seed_count < 1) throw UsageError("--seeds must be at least 1");
  const std::vector<std::string> flags = dataset_flags(datasets);
  const std::string base = config.out.empty() ? "runs/reproduce-" + args[0] : config.out;
  // Every run's context first, so that a setting one of them cannot take stops them all
  // before the first trains.
  std::vector<std::vector<train::RunContext>> runs;
  for (const std::string& flag : flags) {
    runs.emplace_back();
    for (int64_t seed = 0; seed < seed_count; ++seed) {
      train::TrainConfig run = config;
      run.dataset = flag;
      run.seed = seed;
      run.out = (fs::path(base) / (flag + "-seed" + std::to_string(seed))).string();
      run.resume = "auto";  // continues a run stopped part-way; starts one otherwise
      runs.back().push_back(train::resolve_run(std::move(run)));
    }
  }
  std::vector<std::vector<std::vector<double>>> metrics;
  for (std::vector<train::RunContext>& dataset_runs : runs) {
    metrics.emplace_back();
    for (train::RunContext& run : dataset_runs) metrics.back().push_back(run_or_reuse(std::move(run), out));
  }
  out << "\ntest split, " << seed_count << " seed" << (seed_count > 1 ? "s" : "") << " (mean±sd), recipe "
      << args[0] << ":\n"
      << format_reproduce_table(config.model + " + 3D", flags, metrics);
  return 0;
}

}  // namespace kiln::tools
