// `kiln train`: a training run from flags and/or a configuration file (tools/
// config_options.h), on the Trainer (train/trainer.h). Prints the resolved configuration,
// the data and the model, the epochs, each epoch's bottleneck table, and at the end the
// test results with the best and the final weights, the run's bottleneck report and where
// the logs are. --profile-steps N prints only the report of N steps.
#include <iostream>

#include "core/error.h"
#include "nn/module.h"
#include "tools/cli.h"
#include "tools/config_options.h"
#include "train/distributed.h"
#include "train/model_setup.h"
#include "train/progress.h"
#include "train/scans.h"
#include "train/stop_signals.h"
#include "train/trainer.h"

namespace kiln::tools {
namespace {

// --check-data: every header read, every problem printed (train/scans.h, Note [Scan
// checks]); exit 1 when there is one. MedMNIST and synthetic data are loaded (MedMNIST's
// file is MD5-checked) and described.
int check_data(const train::RunContext& run, std::ostream& out) {
  if (!train::is_own_scans(run.config)) {
    const train::TrainData data = train::make_train_data(run.config, run.choices);
    out << data.description << "; " << data.train->size() << " train, " << data.val->size() << " val, "
        << data.test->size() << " test: no problems found\n";
    return 0;
  }
  const train::OwnScans scans = train::read_own_scans(run.config, run.choices, train::saved_split_file(run));
  out << train::format_scan_check(scans);
  return scans.problems.empty() ? 0 : 1;
}

// The run's data; one's own scans checked first (Note [Scan checks]), their problems
// listed one a line before the one-line error that stops the run.
train::TrainData load_data(const train::RunContext& run, std::ostream& out) {
  if (!train::is_own_scans(run.config)) return train::make_train_data(run.config, run.choices);
  const train::OwnScans scans = train::read_own_scans(run.config, run.choices, train::saved_split_file(run));
  if (!scans.problems.empty()) {
    out << train::format_scan_check(scans);
    throw Error("scans '" + run.config.dataset + "': " + std::to_string(scans.problems.size()) + " problem" +
                (scans.problems.size() == 1 ? "" : "s") + ", listed above; nothing was written");
  }
  return train::make_scan_data(scans, run.config, run.choices);
}

}  // namespace

int run_train(const std::vector<std::string>& args, std::ostream& all_ranks_out) {
  train::TrainConfig config;
  const ConfigCommand command{
      .name = "train",
      .description =
          "Train a 3D classifier or regressor on MedMNIST 3D, synthetic volumes or your own scans (a CSV "
          "manifest or a folder), ResNet or DenseNet, every speed technique a flag; logs, checkpoints and a report "
          "of where the time goes."};
  if (!parse_config_command(args, command, config, all_ranks_out)) return 0;
  // Note [Stopping on a signal]: from before the ranks meet, so that a signal passed on to
  // every rank while one still loads its data is a stop (at the first step), never a kill.
  const train::StopSignals stop_signals;
  train::RunContext run = train::resolve_run(config);
  config = run.config;  // as resolved (one's own scans' path made absolute)
  // In a --ddp run rank 0 speaks for all (the others' lines would repeat it).
  std::ostream& out = run.distributed.writes() ? all_ranks_out : train::null_stream();
  if (config.check_data) return check_data(run, out);  // writes nothing
  const bool profile = config.profile_steps > 0;
  if (!profile) {
    out << "configuration:\n" << format_config(config);  // saved in the run folder once the run starts
  }
  const train::TrainData data = load_data(run, out);
  const train::ModelSetup setup = train::make_model(config, data);
  if (!profile) {
    out << "data: " << data.description << "; " << data.train->size() << " train, " << data.val->size()
        << " val, " << data.test->size() << " test\n"
        << "model: " << config.model << ", " << nn::parameter_count(*setup.model) << " parameters\n";
  }
  if (!setup.load_report.empty())  // even when profiling: what a run starts from is never silent
    out << "pretrained weights from " << config.pretrained << ":\n" << setup.load_report;
  train::Trainer trainer(
      std::move(run), data, setup.model,
      {.out = &out, .terminal = &out == &std::cout && train::ProgressBar::is_terminal(stdout)});
  if (!profile) out << "device: " << trainer.device().str() << "\n";
  const train::RunSummary summary = trainer.fit();
  if (summary.stopped_by != 0) {
    out << train::format_bottleneck_report(summary.report);
    return 128 + summary.stopped_by;  // what a shell reports for a process the signal killed
  }
  if (profile) {
    char rate[96];
    std::snprintf(rate, sizeof rate, "%.1f samples/s over the %lld profiled steps (the first included)\n",
                  summary.samples_per_s, static_cast<long long>(summary.steps));
    out << train::format_bottleneck_report(summary.report) << rate;
    return 0;
  }
  out << "\nthe whole run:\n"
      << train::format_bottleneck_report(summary.report) << train::format_summary(summary);
  return 0;
}

}  // namespace kiln::tools
