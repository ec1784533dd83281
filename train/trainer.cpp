// Trainer (train/trainer.h): the loop, over the run's rooms (Trainer::State, train/
// run_state.h), top to bottom: a training step, an epoch of them, validation and model
// selection, the test, and fit(), the epochs from start to summary.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "core/atomic_file.h"
#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/cudnn.h"  // the algorithm cache saved at the end
#include "core/deferred_check.h"
#include "core/error.h"
#include "core/host_sync.h"
#include "core/ops.h"
#include "core/signal_name.h"
#include "core/time_range.h"
#include "dist/ddp.h"
#include "train/evaluate.h"
#include "train/run_state.h"
#include "train/stop_signals.h"

namespace kiln::train {
namespace {

// Whether `metric` beats `best` for the monitored metric (NaN never does; anything finite
// beats a NaN best).
bool improves(double metric, double best, bool higher) {
  if (std::isnan(metric)) return false;
  if (std::isnan(best)) return true;
  return higher ? metric > best : metric < best;
}

// The device work of one micro-batch (Note [A training step]): forward and loss under the
// run's autocast, the scaled backward, the optimizer's update at an accumulation boundary,
// the running sums. It keeps no count on the host, so that --cuda-graphs can capture it
// whole (Note [A graphed step] in train/graphed_step.h).
void step_work(Trainer::State& s, const data::Batch& batch, bool boundary) {
  const Tensor& x = batch.at(data::kImage);
  const Tensor& y = batch.at(data::kLabel);
  const RunContext& run = s.run;
  std::optional<dist::DistributedDataParallel::NoSync> no_sync;  // DDP: all-reduce at steps only
  if (s.ddp && !boundary) no_sync.emplace(*s.ddp);
  Tensor logits, loss;
  {
    const TimeRange range(phase::kForward, run.device);
    const AutocastGuard autocast(run.amp.low_dtype, run.amp.enabled_autocast);
    logits = amp_forward(s.forward_module(), run.amp, x);
    loss = s.objective->loss(logits, y);
  }
  {
    const TimeRange range(phase::kBackward, run.device);
    const Tensor scaled = run.config.accumulate > 1 ? div(loss, static_cast<double>(run.config.accumulate)) : loss;
    s.optimization->scale(scaled).backward();
  }
  no_sync.reset();
  if (boundary) {
    const TimeRange range(phase::kOptimizer, run.device);
    s.optimization->update();
  }
  const NoGradGuard no_grad;
  s.sums.accumulate(loss, s.objective->correct(logits.detach(), y), y.size(0));
}

// One micro-batch: its device work, replayed as one CUDA graph under --cuda-graphs, then
// the host's share: the scheduler's step at a boundary and the counts.
void train_step(Trainer::State& s, const data::Batch& batch, bool boundary) {
  if (s.graphed) {  // only with --accumulate 1: every micro-batch is a boundary
    const TimeRange range(phase::kGraphed, s.run.device);
    s.graphed->run(batch);
  } else {
    step_work(s, batch, boundary);
  }
  if (boundary) {
    s.optimization->after_update();
    ++s.progress.step;
  }
  const Tensor& y = batch.at(data::kLabel);
  RunningSums::count(y.size(0), y.numel(), s.progress);
}

// --cuda-graphs (Note [A graphed step]): a GraphedStep over step_work, with the optimizer
// made capturable, where the step can be captured; otherwise one line saying why the
// steps run eagerly.
void set_up_graphs(Trainer::State& s) {
  const TrainConfig& config = s.run.config;
  if (!config.cuda_graphs) return;
  std::ostream& out = s.logs.out();
  if (!s.run.device.is_cuda()) {
    out << "--cuda-graphs is ignored on the CPU (CUDA graphs record GPU work): the steps run eagerly\n";
    return;
  }
  if (s.ddp) {
    out << "--cuda-graphs: a --ddp step runs eagerly (its gradient all-reduces are not captured)\n";
    return;
  }
  if (config.accumulate > 1) {
    out << "--cuda-graphs: with --accumulate " << config.accumulate
        << " the steps run eagerly (a graph captures a whole step of one micro-batch)\n";
    return;
  }
  s.optimization->make_capturable();
  const GraphedStepOptions options{.optimizer = &s.optimization->optimizer(), .persistent = [&s] {
    std::vector<Tensor> kept = s.model->parameters();
    for (const Tensor& b : s.model->buffers()) kept.push_back(b);
    for (const auto& [name, t] : s.sums.tensors()) kept.push_back(t);
    for (const Tensor& t : s.optimization->scaler_tensors()) kept.push_back(t);
    return kept;
  }, .signature = [&s] {
    std::vector<double> frozen = s.optimization->scaler_signature();
    frozen.push_back(s.model->is_training() ? 1.0 : 0.0);
    return frozen;
  }};
  s.graphed = std::make_unique<GraphedStep>(
      s.run.device, [&s](const data::Batch& b) { step_work(s, b, /*boundary=*/true); }, options);
  out << "--cuda-graphs: each batch shape's step is captured after " << options.warmup_steps
      << " eager steps, then replayed\n";
}

// What the graphs did so far, after an epoch's report.
void report_graphs(Trainer::State& s) {
  if (!s.graphed) return;
  const GraphedStep& g = *s.graphed;
  s.logs.out() << "cuda graphs: " << g.replays() << " steps replayed, " << g.eager_steps()
               << " eager (warm-up, other batch shapes), " << g.captures() << " capture"
               << (g.captures() == 1 ? "" : "s");
  if (g.recaptures() > 0) s.logs.out() << " (" << g.recaptures() << " again because " << g.last_recapture_reason() << ")";
  s.logs.out() << "\n";
}

// The progress line after each micro-batch: counts and rates from the host's clock, the
// loss as last read at a log step (no read here).
void show_progress(Trainer::State& s, int64_t epoch, int64_t done, int64_t batches, double elapsed,
                   int64_t epoch_samples) {
  const double rate = elapsed > 0 ? static_cast<double>(epoch_samples) / elapsed : 0;
  const double eta =
      done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(batches - done) : 0;
  const double loss = s.sums.loss();
  s.logs.progress({.epoch = epoch,
                   .epochs = s.run.config.epochs,
                   .step = done,
                   .steps = batches,
                   .samples_per_s = rate,
                   .loss = std::isnan(loss) ? std::nullopt : std::optional<double>(loss),
                   .lr = s.optimization->lr(),
                   .eta_s = eta});
}

// Note [A diverged run]: a non-finite running loss, as read at a log step (no extra read),
// stops the run at once, naming the step and the usual causes, before any later checkpoint
// could hold its weights; the checkpoints already written are kept, so the run can resume
// from the last good one with other settings. `here`: this rank's loss (else another's).
Error diverged_error(const Trainer::State& s, int64_t epoch, int64_t batch, bool here) {
  const std::vector<std::string> kept = s.run.folder.checkpoints();
  char line[160];
  std::snprintf(line, sizeof line, "the training loss is %s at epoch %lld, batch %lld (step %lld)",
                !here ? "not finite on another rank" : std::isnan(s.sums.loss()) ? "NaN" : "infinite",
                static_cast<long long>(epoch), static_cast<long long>(batch), static_cast<long long>(s.progress.step));
  return Error(std::string(line) +
               ": the run diverged. Likely causes: a learning rate too high (--lr), no gradient clipping "
               "(--clip-grad-norm 1), float16 overflowing (--amp-dtype bf16, or a smaller loss scale), an eps of 0, "
               "or inputs with infinite values. " +
               (kept.empty() ? std::string("No checkpoint was written before it.")
                             : "The last checkpoint before it is kept: " + kept.back() +
                                   " (--resume it with other settings)."));
}

// Note [Ranks decide together]: where the loop reads the device (a log step, a mid-epoch
// checkpoint, an epoch's end) it decides whether the run diverged (Note [A diverged run])
// and whether a signal asks it to stop (Note [Stopping on a signal], train/stop_signals.h).
// The ranks of a --ddp run decide together, in one all-reduce of the two flags: a rank that
// stopped alone would leave the others waiting in the next collective. Between reads one
// process takes its own signal flag at once (a load); a --ddp rank waits for the next read.
void decide_at_read(Trainer::State& s, int64_t epoch, int64_t batch) {
  const bool diverged = s.progress.seen > 0 && !std::isfinite(s.sums.loss());
  int64_t signal = s.stopping_for != 0 ? s.stopping_for : stop_signal();
  bool any_diverged = diverged;
  if (s.run.distributed.enabled) {
    const std::vector<int64_t> agreed =
        max_over_ranks(s.run.distributed, {diverged ? 1 : 0, signal}, s.run.device);
    any_diverged = agreed[0] != 0;
    signal = agreed[1];
  }
  if (any_diverged) throw diverged_error(s, epoch, batch, diverged);
  s.stopping_for = static_cast<int>(signal);
}

// One epoch's training, from the batch a mid-epoch checkpoint reached; stops after
// --profile-steps optimizer steps when it is set, and at an optimizer step's end when a
// signal asks (Note [Stopping on a signal]), leaving s.progress.batch > 0.
void train_epoch(Trainer::State& s, int64_t epoch) {
  const TrainConfig& config = s.run.config;
  RunProgress& p = s.progress;
  s.model->train();
  const int64_t batches = s.batches.train->size();
  if (p.batch == 0) s.sums.reset(p);
  const Stopwatch watch;
  int64_t done = p.batch, epoch_samples = 0;
  DeferIndexChecks deferred;  // a GPU's index checks read back at log steps, not every step
  for (const data::Batch& batch : s.batches.train->epoch(epoch, p.batch)) {
    const HostSyncs syncs_before = host_syncs();
    const bool boundary = (done + 1) % config.accumulate == 0 || done + 1 == batches;
    train_step(s, batch, boundary);
    ++done;
    ++p.micro_batches;
    const int64_t samples = batch.at(data::kLabel).size(0);
    epoch_samples += samples;
    s.times.trained_samples += samples;
    const bool logs = p.micro_batches % config.log_every == 0 || done == batches;
    if (logs) {  // the loop's one read of the device
      deferred.check();
      s.sums.read(p);
      s.logs.step(p.step, epoch, done, s.optimization->lr(), s.sums.loss(), s.sums.accuracy());
      decide_at_read(s, epoch, done);  // Note [Ranks decide together]
    } else if (!s.run.distributed.enabled && s.stopping_for == 0) {
      s.stopping_for = stop_signal();
    }
    if (config.profile_steps == 0) show_progress(s, epoch, done, batches, watch.seconds(), epoch_samples);
    if (!logs) {
      s.times.quiet_syncs += host_syncs() - syncs_before;
      ++s.times.quiet_steps;
    }
    p.batch = done == batches ? 0 : done;
    if (config.profile_steps > 0) {  // optimizer steps (Note [Steps and batches] in train/bottleneck.h)
      if (boundary && p.step >= config.profile_steps) break;
      continue;
    }
    const bool stops = s.stopping_for != 0 && boundary && p.batch > 0;
    if (stops || (config.checkpoint_every > 0 && boundary && p.batch > 0 && p.step % config.checkpoint_every == 0)) {
      if (!logs) {  // a checkpoint never holds weights a bad index touched, nor diverged ones
        deferred.check();
        s.sums.read(p);
        decide_at_read(s, epoch, done);
      }
      s.checkpoints.save(s.state(), p);
    }
    if (stops) break;
  }
  deferred.check();
}

// The epoch's validation (every --eval-every epochs and the last), the choice of the best
// epoch, the schedule's epoch and plateau steps, and the epoch's logs. Returns whether
// early stopping ends the run.
bool validate_and_select(Trainer::State& s, int64_t epoch, double seconds, double samples_per_s) {
  const TrainConfig& config = s.run.config;
  RunProgress& p = s.progress;
  EpochRow row{.epoch = epoch,
               .step = p.step,
               .train_loss = s.sums.loss(),  // the epoch's last micro-batch logged: its read is the epoch's
               .train_running = s.sums.accuracy(),
               .seconds = seconds,
               .samples_per_s = samples_per_s};
  bool stop = false;
  if (epoch % config.eval_every == 0 || epoch == config.epochs) {
    SplitEvaluation val;
    {
      const TimeRange range(phase::kEvaluation);
      share_rank0_buffers(s.run.distributed, *s.model);  // Note [Ranks agree]
      val = evaluate_split(*s.model, *s.batches.val, *s.objective, s.run.amp, s.data.task);
    }
    std::vector<double> values = {val.loss};
    for (const Monitor metric : validation_metrics(s.data.task)) values.push_back(val.metric(metric));
    const std::vector<double> agreed = rank0_values(s.run.distributed, values, s.run.device);
    row.val_loss = agreed[0];
    row.val_metrics.assign(agreed.begin() + 1, agreed.end());
    const std::vector<Monitor> metrics = validation_metrics(s.data.task);
    const auto monitored = std::find(metrics.begin(), metrics.end(), s.monitor);
    const double metric = monitored == metrics.end() ? row.val_loss : row.val_metrics[monitored - metrics.begin()];
    s.optimization->schedule().after_validation(metric);
    // Note [An undefined monitor]: a NaN metric (one class alone in the validation split
    // makes AUC undefined) never chooses an epoch; the validation loss does, from then on.
    if (std::isnan(metric) && !p.monitor_fallback && s.monitor != Monitor::Loss && std::isfinite(row.val_loss)) {
      p.monitor_fallback = true;
      p.best_metric = std::nan("");
      s.logs.out() << "val " << choice_name(s.monitor) << " is undefined (NaN; a class absent from the validation "
                   << "split?): the best epoch is chosen by val loss from now on\n";
    }
    const double chooser = p.monitor_fallback ? row.val_loss : metric;
    if (improves(chooser, p.best_metric, p.monitor_fallback ? false : higher_is_better(s.monitor))) {
      p.best_metric = chooser;
      p.best_epoch = epoch;
      p.bad_validations = 0;
      s.checkpoints.keep_best(*s.model, epoch);
    } else {
      ++p.bad_validations;
      stop = config.patience > 0 && p.bad_validations >= config.patience;
    }
  }
  row.lr = s.optimization->lr();  // the rate this epoch ended with, before the schedule's epoch step
  s.optimization->schedule().after_epoch();
  row.loss_scale = s.optimization->loss_scale();
  row.best = p.best_epoch == epoch;
  s.logs.epoch(row);
  return stop;
}

// The test split with the best weights and with the final ones (Note [Best and final]).
std::vector<TestResult> test(Trainer::State& s) {
  const TimeRange range(phase::kEvaluation);
  std::vector<TestResult> results;
  const auto run = [&](const std::string& weights, int64_t from_epoch) {
    TestResult result{.weights = weights, .epoch = from_epoch, .metrics = {}, .threshold = kNotMeasured,
                      .acc_at_threshold = kNotMeasured};
    const SplitEvaluation tested = evaluate_split(*s.model, *s.batches.test, *s.objective, s.run.amp, s.data.task);
    result.metrics = tested.metrics;
    if (s.data.task == Task::Binary) {
      const SplitEvaluation val = evaluate_split(*s.model, *s.batches.val, *s.objective, s.run.amp, s.data.task);
      result.threshold = youden_threshold(label_vector(val.labels), positive_scores(val.scores));
      result.acc_at_threshold =
          accuracy_at(label_vector(tested.labels), positive_scores(tested.scores), result.threshold);
    }
    results.push_back(result);
  };
  const nn::StateDict final_state = clone_state(s.model->state_dict());
  if (!s.checkpoints.best().empty()) {
    s.model->load_state_dict(s.checkpoints.best());
    run("best", s.progress.best_epoch);
    s.model->load_state_dict(final_state);
  }
  run("final", s.progress.epoch);
  return results;
}

// Where the run starts: a checkpoint's progress, or a new run in a prepared folder. The
// folder is locked first, and the checkpoint read and checked before anything is written
// (Note [Only Kiln's files] in train/run_folder.h).
void start(Trainer::State& s) {
  if (s.run.writes_files()) s.lock.emplace(s.run.folder);
  std::optional<ResumePoint> from = s.checkpoints.prepare_resume();
  if (s.run.writes_files()) {
    s.run.folder.start_run(from.has_value(), s.run.config.overwrite, json::dump(to_json(s.run.config), 2) + "\n",
                           identity_json(s.run.config));
    if (!s.data.split_table.empty())  // Note [Scan splits] in train/scans.h
      save_atomically(s.data.split_table, s.run.folder.path(RunFile::Split), "kiln train");
    s.logs.out() << "run folder: " << s.run.folder.root() << "\n";
  }
  if (from)
    s.progress = s.checkpoints.resume(std::move(*from), s.state());
  else if (s.run.writes_files())
    s.logs.open(s.run.folder, s.run.config, nullptr);
}

// Note [Stopping on a signal]: the run ends where its last checkpoint is, saying so and how
// to continue; no test and no summary, as for a run that has not finished.
void stop_for_signal(Trainer::State& s, RunSummary& summary) {
  summary.stopped = "signal";
  summary.stopped_by = s.stopping_for;
  std::ostream& out = s.logs.out();
  out << "\nstopped by " << signal_name(s.stopping_for) << ": " << progress_point(s.progress);
  const std::vector<std::string> saved = s.run.folder.checkpoints();
  if (s.run.writes_files() && !saved.empty()) out << "; its checkpoint is " << saved.back();
  out << ". Continue with the same command and --resume auto.\n";
}

// The end of a run: the test, the final weights, the algorithm cache, summary.json.
void finish(Trainer::State& s, RunSummary& summary) {
  summary.test = test(s);
  if (!s.run.writes_files()) return;
  if (!s.run.config.algo_cache.empty() && s.run.device.is_cuda()) cudnn::save_algorithm_cache(s.run.config.algo_cache);
  s.checkpoints.save_final(*s.model, s.progress.epoch);
  save_atomically(json::dump(to_json(summary, s.run.config), 2) + "\n", s.run.folder.path(RunFile::Summary),
                  "kiln train");
  summary.files = s.run.folder.written_files();
}

}  // namespace

// ---- Trainer ------------------------------------------------------------------------------

Trainer::Trainer(RunContext run, TrainData data, std::shared_ptr<nn::Layer> model, TrainerOutput output)
    : state_(std::make_unique<State>(std::move(run), std::move(data), std::move(model), output)) {}

Trainer::Trainer(TrainConfig config, TrainData data, std::shared_ptr<nn::Layer> model, TrainerOutput output)
    : Trainer(resolve_run(std::move(config)), std::move(data), std::move(model), output) {}

Trainer::~Trainer() = default;

nn::Layer& Trainer::model() { return *state_->model; }
Device Trainer::device() const { return state_->run.device; }
const std::string& Trainer::run_dir() const { return state_->run.folder.root(); }

RunSummary Trainer::fit() {
  State& s = *state_;
  const TrainConfig& config = s.run.config;
  start(s);
  set_up_graphs(s);
  RunSummary summary;
  summary.run_dir = s.run.folder.root();
  summary.monitor = choice_name(s.monitor);
  summary.classes = s.data.class_names;
  summary.task = s.data.task;
  summary.stopped = "completed";
  const Stopwatch run_watch;
  if (s.progress.stopped_early) summary.stopped = "early stopping";  // a resumed run that had stopped
  for (int64_t epoch = s.progress.epoch + 1; epoch <= config.epochs && !s.progress.stopped_early; ++epoch) {
    Timeline timeline;
    const Stopwatch watch;
    const int64_t samples_before = s.times.trained_samples;
    const HostSyncs quiet_before = s.times.quiet_syncs;
    train_epoch(s, epoch);
    if (s.stopping_for != 0 && s.progress.batch > 0) {  // Note [Stopping on a signal]
      stop_for_signal(s, summary);
      break;
    }
    const double train_seconds = watch.seconds();
    const double rate =
        train_seconds > 0 ? static_cast<double>(s.times.trained_samples - samples_before) / train_seconds : 0;
    s.times.train_seconds += train_seconds;
    if (config.profile_steps > 0) {
      add_phase_totals(s.times.records, timeline.stop());
      s.times.wall_seconds += train_seconds;
      summary.stopped = "profile";
      break;
    }
    const bool stop = validate_and_select(s, epoch, watch.seconds(), rate);
    s.progress.stopped_early = stop;
    s.progress.epoch = epoch;
    s.progress.batch = 0;
    s.checkpoints.save(s.state(), s.progress);
    decide_at_read(s, epoch, 0);  // a signal that came during validation
    const std::vector<TimeRangeRecord> ranges = timeline.stop();
    const double epoch_wall = watch.seconds();
    s.logs.out() << format_bottleneck_report(
        s.report(ranges, epoch_wall, s.batches.train->size(), s.times.quiet_syncs - quiet_before));
    report_graphs(s);
    add_phase_totals(s.times.records, ranges);
    s.times.wall_seconds += epoch_wall;
    if (stop) {
      summary.stopped = "early stopping";
      s.logs.out() << "early stopping: no better val " << summary.monitor << " for " << config.patience
                   << " validations\n";
      break;
    }
    if (s.stopping_for != 0) {
      stop_for_signal(s, summary);
      break;
    }
  }
  summary.epochs = s.progress.epoch;
  summary.steps = s.progress.step;
  summary.best_epoch = s.progress.best_epoch;
  summary.best_metric = s.progress.best_metric;
  summary.train_seconds = run_watch.seconds();
  summary.samples_per_s = s.times.samples_per_s();
  summary.quiet_steps = s.times.quiet_steps;
  summary.quiet_step_syncs = s.times.quiet_syncs.total();
  summary.report = s.report(s.times.records, s.times.wall_seconds, s.progress.micro_batches, s.times.quiet_syncs);
  if (summary.stopped == "completed" || summary.stopped == "early stopping") finish(s, summary);
  return summary;
}

}  // namespace kiln::train
