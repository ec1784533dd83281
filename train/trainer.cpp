// Trainer (train/trainer.h): set-up from the configuration, the epoch loop (Note [A
// training step]), validation and model selection, checkpoints and resume (train/
// checkpoint.h), logs, and the test at the end (Note [Best and final]).
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include "core/atomic_file.h"
#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/backend.h"
#include "core/cudnn.h"
#include "core/deferred_check.h"
#include "core/error.h"
#include "core/host_sync.h"
#include "core/ops.h"
#include "core/time_range.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dist/ddp.h"
#include "dist/sync_batch_norm.h"
#include "nn/serialize.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/csv_log.h"
#include "train/device_batches.h"
#include "train/distributed.h"
#include "train/evaluate.h"
#include "train/objective.h"
#include "train/progress.h"
#include "train/schedule.h"
#include "train/tensorboard.h"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const std::vector<std::string> kEpochColumns = {"epoch",         "lr",        "train/loss", "train/acc",
                                                "val/loss",      "val/auc",   "val/acc",    "seconds",
                                                "samples_per_s", "loss_scale"};
const std::vector<std::string> kStepColumns = {"step", "epoch", "batch", "lr", "train/loss", "train/acc"};

// The files of a run folder that a new run replaces (--overwrite).
void clear_run_folder(const std::string& run_dir) {
  std::error_code error;
  fs::remove_all(fs::path(run_dir) / "checkpoints", error);
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("events.out.tfevents.") || name == "epochs.csv" || name == "steps.csv" ||
        name == "summary.json" || name == "best.safetensors" || name == "final.safetensors") {
      fs::remove(entry.path(), error);
    }
  }
}

nn::StateDict clone_state(const nn::StateDict& state) {
  nn::StateDict copy;
  for (const auto& [name, tensor] : state) copy.emplace_back(name, tensor.clone());
  return copy;
}

// Whether `metric` beats `best` for the monitored metric (NaN never does; anything finite
// beats a NaN best).
bool improves(double metric, double best, bool higher_is_better) {
  if (std::isnan(metric)) return false;
  if (std::isnan(best)) return true;
  return higher_is_better ? metric > best : metric < best;
}

// Where rank > 0 of a distributed run prints: nowhere.
std::ostream& null_stream() {
  static std::ostream discard(nullptr);
  return discard;
}

// The loader of a split; training shuffles (seeded; in a distributed run each rank takes
// its share of the one permutation, train/distributed.h) and may pin.
std::unique_ptr<data::DataLoader> make_loader(const TrainConfig& config,
                                              std::shared_ptr<const data::Dataset> dataset,
                                              data::TransformPtr transform, bool train, Device device,
                                              const DistributedRun& distributed) {
  data::SamplerPtr sampler = nullptr;
  if (train && distributed.enabled) {
    sampler =
        std::make_shared<data::DistributedSampler>(dataset->size(), distributed.world_size, distributed.rank,
                                                   /*shuffle=*/true, static_cast<uint64_t>(config.seed));
  }
  return std::make_unique<data::DataLoader>(
      std::move(dataset), data::DataLoaderOptions{.batch_size = config.batch_size,
                                                  .shuffle = train && sampler == nullptr,
                                                  .sampler = sampler,
                                                  .drop_last = train && config.drop_last,
                                                  .num_workers = config.workers,
                                                  .prefetch_factor = config.prefetch_factor,
                                                  .persistent_workers = config.persistent_workers,
                                                  .pin_memory = config.pin_memory && device.is_cuda(),
                                                  .transform = std::move(transform),
                                                  .seed = static_cast<uint64_t>(config.seed)});
}

}  // namespace

Device resolve_device(const std::string& name) {
  if (name == "auto") return cuda_is_available() ? Device::cuda() : Device::cpu();
  const Device device = Device::parse(name);
  if (device.is_cuda()) {
    KILN_CHECK(cuda_is_available(), "device ", name, ": CUDA is not available: ", cuda_unavailable_reason());
    KILN_CHECK(device.index < cuda_device_count(), "device ", name, ": there are ", cuda_device_count(),
               " GPUs");
  }
  return device;
}

std::string run_folder(const TrainConfig& config) {
  return config.out.empty() ? "runs/" + config.dataset + "-" + config.model : config.out;
}

// ---- state -----------------------------------------------------------------------------

struct Trainer::State {
  TrainConfig config;
  TrainData data;
  std::shared_ptr<nn::Layer> model;
  DistributedRun distributed;
  std::ostream& out;
  bool terminal;
  Device device;
  std::string run_dir;
  bool higher_is_better;

  std::unique_ptr<Objective> objective;
  AmpProperties amp;
  std::shared_ptr<dist::DistributedDataParallel> ddp;  // wraps `model` in a --ddp run
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<Schedule> schedule;
  std::unique_ptr<optim::GradScaler> scaler;
  std::unique_ptr<data::DataLoader> train_loader, val_loader, test_loader;
  std::unique_ptr<DeviceBatches> train_batches, val_batches, test_batches;

  // Progress (what a checkpoint records).
  int64_t epoch = 0;  // epochs completed
  int64_t batch = 0;  // batches of epoch + 1 done (a mid-epoch checkpoint), else 0
  int64_t step = 0;   // optimizer steps
  double best_metric = kNaN;
  int64_t best_epoch = 0;
  int64_t bad_validations = 0;
  bool stopped_early = false;  // the last validation stopped the run (patience)
  nn::StateDict best_state;
  // The current epoch's running sums (on the device) and samples.
  Tensor loss_sum, correct;
  int64_t seen = 0, label_elements = 0;
  double last_loss = kNaN, last_acc = kNaN;  // the running sums as last read (log steps)

  std::unique_ptr<CsvLog> epochs_csv, steps_csv;
  std::unique_ptr<TensorBoardWriter> tensorboard;
  ProgressBar progress;

  // The report's inputs over the run (records: one per phase, add_phase_totals).
  std::vector<TimeRangeRecord> records;
  double wall_seconds = 0, train_phase_seconds = 0;
  int64_t micro_batches = 0, trained_samples = 0;
  HostSyncs quiet_syncs;
  int64_t quiet_steps = 0;

  State(TrainConfig config_in, TrainData data_in, std::shared_ptr<nn::Layer> model_in, TrainerOutput output)
      : config(std::move(config_in)),
        data(std::move(data_in)),
        model(std::move(model_in)),
        distributed(join_distributed(config)),
        out(!distributed.writes() ? null_stream()
            : output.out          ? *output.out
                                  : std::cout),
        terminal(output.terminal),
        device(run_device(config, distributed)),
        run_dir(run_folder(config)),
        higher_is_better(config.monitor != "loss"),
        progress(out, terminal) {}

  void setup();
  void open_run_folder(bool resuming);
  void open_logs(const json::Value* saved_logs);
  std::optional<std::string> checkpoint_to_resume() const;
  void resume(const std::string& path);
  void reset_running_sums();

  void train_epoch(int64_t epoch, int64_t steps_limit);
  void optimizer_step();
  void show_progress(int64_t epoch, int64_t batches_done, int64_t batches, Clock::time_point epoch_start,
                     int64_t epoch_samples);
  void log_step(int64_t epoch, int64_t batches_done);
  bool validate_and_select(int64_t epoch, double train_loss, double train_acc, double seconds,
                           double samples_per_s);
  void save_checkpoint(int64_t epoch, int64_t batch);
  void share_rank0_buffers();
  void restore_best_weights(const std::string& checkpoint_path);
  void forget_later_checkpoints(const std::string& checkpoint_path);
  std::vector<double> rank0_values(const std::vector<double>& values);
  void save_best_weights();
  std::vector<TestResult> test();
  BottleneckReport report(const std::vector<TimeRangeRecord>& records, double wall, int64_t steps,
                          const HostSyncs& syncs) const;
};

void Trainer::State::setup() {
  validate(config);
  KILN_CHECK(model != nullptr, "Trainer: the model is null");
  KILN_CHECK(data.train && data.val && data.test, "Trainer: the data needs train, val and test datasets");
  cudnn::set_benchmark(config.cudnn_benchmark);
  cudnn::set_deterministic(config.deterministic);
  if (!config.algo_cache.empty() && fs::exists(config.algo_cache) && device.is_cuda()) {
    cudnn::load_algorithm_cache(config.algo_cache);
  }
  const std::vector<int64_t> counts =
      config.pos_weight == "auto" ? class_counts(*data.train, data.classes) : std::vector<int64_t>{};
  objective = std::make_unique<Objective>(config, data.task, data.classes, counts, device);

  train_loader = make_loader(config, data.train, data.train_transform, true, device, distributed);
  val_loader = make_loader(config, data.val, data.eval_transform, false, device, distributed);
  test_loader = make_loader(config, data.test, data.eval_transform, false, device, distributed);
  KILN_CHECK(train_loader->size() > 0, "batch-size ", config.batch_size, " is larger than the training set (",
             data.train->size(), " samples) with drop-last: no batch to train on");
  const bool prefetch = config.device_prefetch;
  train_batches = std::make_unique<DeviceBatches>(*train_loader, device, prefetch);
  val_batches = std::make_unique<DeviceBatches>(*val_loader, device, prefetch);
  test_batches = std::make_unique<DeviceBatches>(*test_loader, device, prefetch);

  if (config.sync_bn) dist::convert_sync_batchnorm(*model, distributed.group);
  model->to(device);
  const DType low = config.amp_dtype == "bf16" ? DType::BFloat16 : DType::Float16;
  optimizer = make_optimizer(config, model->parameters());
  amp = amp_initialize(*model, *optimizer, parse_opt_level(config.amp), low);
  if (distributed.enabled) {  // after amp: DDP hooks the parameters the optimizer holds
    ddp =
        std::make_shared<dist::DistributedDataParallel>(model, dist::DDPOptions{.group = distributed.group});
  }
  scaler = std::make_unique<optim::GradScaler>(
      optim::GradScalerOptions{.enabled = amp.dynamic_loss_scale && low == DType::Float16});
  const int64_t steps_per_epoch = (train_loader->size() + config.accumulate - 1) / config.accumulate;
  schedule = std::make_unique<Schedule>(config, *optimizer, steps_per_epoch, higher_is_better);
  manual_seed(static_cast<uint64_t>(config.seed) + 1);  // dropout's stream, apart from the initialisation's
  reset_running_sums();
}

void Trainer::State::reset_running_sums() {
  loss_sum = zeros({}, {.dtype = DType::Float32, .device = device});
  correct = zeros({}, {.dtype = DType::Int64, .device = device});
  seen = label_elements = 0;
  last_loss = last_acc = kNaN;
}

// ---- the run folder, logs and checkpoints ----------------------------------------------------

std::optional<std::string> Trainer::State::checkpoint_to_resume() const {
  if (config.resume.empty()) return std::nullopt;
  if (config.resume != "auto") {
    KILN_CHECK(fs::exists(config.resume), "--resume ", config.resume, ": no such file");
    return config.resume;
  }
  const std::vector<std::string> checkpoints = list_checkpoints(run_dir);
  if (checkpoints.empty()) return std::nullopt;
  return checkpoints.back();
}

void Trainer::State::open_run_folder(bool resuming) {
  if (!distributed.writes() || config.profile_steps > 0) return;  // rank 0 writes; a profile writes nothing
  std::error_code error;
  fs::create_directories(run_dir, error);
  KILN_CHECK(!error, "run folder ", run_dir, ": cannot create it: ", error.message());
  if (!resuming) {
    // A run is its checkpoints (or its summary): a folder whose run died before its first
    // checkpoint holds nothing to continue, and --resume auto starts it afresh.
    const bool has_run = !list_checkpoints(run_dir).empty() || fs::exists(fs::path(run_dir) / "summary.json");
    KILN_CHECK(!has_run || config.overwrite, "run folder ", run_dir,
               " already holds a run; continue it with --resume auto, replace it with --overwrite, or choose "
               "another --out");
    clear_run_folder(
        run_dir);  // a replaced run's files, or those of one that died before its first checkpoint
  }
  save_atomically(json::dump(to_json(config), 2) + "\n", (fs::path(run_dir) / "config.json").string(),
                  "kiln train");
}

void Trainer::State::open_logs(const json::Value* saved_logs) {
  if (config.profile_steps > 0 || !distributed.writes()) return;
  epochs_csv = std::make_unique<CsvLog>((fs::path(run_dir) / "epochs.csv").string(), kEpochColumns);
  if (config.csv_per_step) {
    steps_csv = std::make_unique<CsvLog>((fs::path(run_dir) / "steps.csv").string(), kStepColumns);
  }
  if (saved_logs != nullptr) {
    if (const json::Value* text = saved_logs->find("epochs.csv")) epochs_csv->restore(text->as_string());
    if (const json::Value* text = saved_logs->find("steps.csv"); text && steps_csv)
      steps_csv->restore(text->as_string());
  }
  if (config.tensorboard) tensorboard = std::make_unique<TensorBoardWriter>(run_dir);
}

void Trainer::State::resume(const std::string& path) {
  CheckpointContents checkpoint = read_checkpoint(path, device);
  check_same_run(*checkpoint.state.find("config"), config, path);
  model->load_state_dict(tensors_under(checkpoint.tensors, "model."));
  optimizer->load_state_dict({.tensors = tensors_under(checkpoint.tensors, "optimizer."),
                              .param_groups = *checkpoint.state.find("optimizer"),
                              .source = path});
  schedule->load_state_dict(*checkpoint.state.find("scheduler"));
  scaler->load_state_dict(*checkpoint.state.find("scaler"));
  restore_generator_states(*checkpoint.state.find("generators"), path);
  const json::Value& progress_state = *checkpoint.state.find("progress");
  const auto integer = [&](const char* key) {
    const json::Value* value = progress_state.find(key);
    KILN_CHECK(value && value->is(json::Type::Integer), path, ": progress has no integer \"", key, "\"");
    return value->as_integer();
  };
  epoch = integer("epoch");
  batch = integer("batch");
  step = integer("step");
  best_epoch = integer("best_epoch");
  bad_validations = integer("bad_validations");
  seen = integer("seen");
  label_elements = integer("label_elements");
  micro_batches = integer("micro_batches");
  stopped_early = integer("stopped_early") != 0;
  KILN_CHECK(batch == 0 || integer("world_size") == distributed.world_size, path,
             " was taken in the middle of an epoch by ", integer("world_size"), " ranks; this run has ",
             distributed.world_size,
             ", whose batches hold other samples (resume from an epoch's end instead)");
  const json::Value* best = progress_state.find("best_metric");
  best_metric = best && !best->is(json::Type::Null) ? best->as_number() : kNaN;
  for (const auto& [name, tensor] : tensors_under(checkpoint.tensors, "running.")) {
    if (name == "loss_sum") loss_sum = tensor.to(device);
    if (name == "correct") correct = tensor.to(device);
  }
  restore_best_weights(path);
  forget_later_checkpoints(path);
  open_logs(checkpoint.state.find("logs"));
  out << "resumed from " << path << ": epoch " << epoch
      << (batch > 0 ? ", batch " + std::to_string(batch) : "") << ", step " << step << "\n";
}

// The best epoch's weights of a resumed run: best.safetensors when it is that epoch's (its
// "epoch" metadata), else the model of that epoch's checkpoint (pruning keeps it); and
// best.safetensors rewritten to match, since a run resumed from an older checkpoint may
// have left a later run's best there.
void Trainer::State::restore_best_weights(const std::string& checkpoint_path) {
  if (best_epoch == 0) return;
  const std::string best_path = (fs::path(run_dir) / "best.safetensors").string();
  if (fs::exists(best_path)) {
    const safetensors::Loaded best = safetensors::load(best_path, device);
    const auto epoch_of = best.metadata.find("epoch");
    if (epoch_of != best.metadata.end() && epoch_of->second == std::to_string(best_epoch)) {
      best_state = best.tensors;
      return;
    }
  }
  const std::string best_checkpoint =
      (fs::path(run_dir) / "checkpoints" / checkpoint_name(best_epoch, 0)).string();
  if (!fs::exists(best_checkpoint)) {
    out << "warning: " << checkpoint_path << ": the weights of its best epoch (" << best_epoch
        << ") are in neither best.safetensors nor " << best_checkpoint
        << "; the test will use the final weights only, unless a later epoch is better\n";
    best_epoch = 0;
    best_metric = kNaN;
    return;
  }
  best_state = tensors_under(read_checkpoint(best_checkpoint, device).tensors, "model.");
  if (!distributed.writes()) return;
  const nn::StateDict current = clone_state(model->state_dict());
  model->load_state_dict(best_state);
  save_best_weights();
  model->load_state_dict(current);
}

// Resuming from an older checkpoint of this run folder starts a new branch of the run: the
// checkpoints after it belong to the abandoned one (and would be what --resume auto picks).
void Trainer::State::forget_later_checkpoints(const std::string& checkpoint_path) {
  if (!distributed.writes()) return;
  std::error_code error;
  const fs::path resumed = fs::weakly_canonical(checkpoint_path, error);
  const std::vector<std::string> paths = list_checkpoints(run_dir);
  const auto found = std::find_if(paths.begin(), paths.end(), [&](const std::string& path) {
    return fs::weakly_canonical(path, error) == resumed;
  });
  if (found == paths.end()) return;  // a checkpoint from elsewhere
  for (auto later = found + 1; later != paths.end(); ++later) fs::remove(*later, error);
}

void Trainer::State::save_checkpoint(int64_t epoch_number, int64_t batch_number) {
  if (!distributed.writes()) return;
  const TimeRange range(phase::kCheckpoint);
  CheckpointContents contents;
  for (const auto& [name, tensor] : model->state_dict())
    contents.tensors.emplace_back("model." + name, tensor);
  optim::OptimizerStateDict optimizer_state = optimizer->state_dict();
  for (auto& [name, tensor] : optimizer_state.tensors)
    contents.tensors.emplace_back("optimizer." + name, tensor);
  contents.tensors.emplace_back("running.loss_sum", loss_sum);
  contents.tensors.emplace_back("running.correct", correct);
  json::Value progress_state = json::Value::object();
  // "epoch": epochs completed; "batch": batches of the next epoch done (a mid-epoch checkpoint).
  progress_state.add("epoch", json::Value::integer(batch_number > 0 ? epoch_number - 1 : epoch_number));
  progress_state.add("batch", json::Value::integer(batch_number));
  progress_state.add("step", json::Value::integer(step));
  progress_state.add("best_metric",
                     std::isnan(best_metric) ? json::Value() : json::Value::number(best_metric));
  progress_state.add("best_epoch", json::Value::integer(best_epoch));
  progress_state.add("bad_validations", json::Value::integer(bad_validations));
  progress_state.add("seen", json::Value::integer(seen));
  progress_state.add("label_elements", json::Value::integer(label_elements));
  progress_state.add("micro_batches", json::Value::integer(micro_batches));
  progress_state.add("stopped_early", json::Value::integer(stopped_early ? 1 : 0));
  progress_state.add("world_size", json::Value::integer(distributed.world_size));
  json::Value logs = json::Value::object();
  if (epochs_csv) logs.add("epochs.csv", json::Value::string(epochs_csv->text()));
  if (steps_csv) logs.add("steps.csv", json::Value::string(steps_csv->text()));
  contents.state = json::Value::object({{"format", json::Value::integer(1)},
                                        {"config", to_json(config)},
                                        {"progress", std::move(progress_state)},
                                        {"optimizer", std::move(optimizer_state.param_groups)},
                                        {"scheduler", schedule->state_dict()},
                                        {"scaler", scaler->state_dict()},
                                        {"generators", generator_states()},
                                        {"logs", std::move(logs)}});
  const std::string path =
      (fs::path(run_dir) / "checkpoints" / checkpoint_name(epoch_number, batch_number)).string();
  const SaveStatus status = write_checkpoint(contents, path);
  if (!status.durable) out << "warning: " << status.warning << "\n";
  if (epochs_csv) epochs_csv->flush();
  if (steps_csv) steps_csv->flush();
  prune_checkpoints(run_dir, config.keep_last, best_epoch > 0 ? checkpoint_name(best_epoch, 0) : "");
}

void Trainer::State::save_best_weights() {
  if (config.profile_steps > 0) return;
  const TimeRange range(phase::kCheckpoint);
  best_state = clone_state(model->state_dict());
  if (!distributed.writes()) return;
  nn::save_weights(*model, (fs::path(run_dir) / "best.safetensors").string(),
                   {{"epoch", std::to_string(best_epoch)},
                    {"monitor", config.monitor},
                    {kWeightsConfigKey, json::dump(to_json(config))}});
}

// ---- agreement between ranks --------------------------------------------------------------

// Note [Ranks agree]: in a --ddp run every rank must take the same decisions (the best
// epoch, the plateau scheduler's step, early stopping), or one rank leaves the loop while
// the others wait in a collective. Parameters agree (DDP), but each rank's last forward
// updated its batch-norm running statistics on its own batch; so before validating, rank
// 0's buffers are copied to every rank (the model each rank evaluates, and keeps as the
// best, is then the same), and the validation numbers the decisions use are rank 0's.
void Trainer::State::share_rank0_buffers() {
  if (!distributed.enabled) return;
  const std::vector<Tensor> buffers = model->buffers();
  if (!buffers.empty()) dist::broadcast_coalesced(*distributed.group, buffers, 0);
}

std::vector<double> Trainer::State::rank0_values(const std::vector<double>& values) {
  if (!distributed.enabled) return values;
  const Tensor shared = tensor(values).to(device);
  distributed.group->broadcast(shared, 0)->wait();
  return shared.to_vector<double>();
}

// ---- training --------------------------------------------------------------------------

void Trainer::State::optimizer_step() {
  const TimeRange range(phase::kOptimizer, device);
  if (config.clip_grad_norm > 0 || config.clip_grad_value > 0) {
    scaler->unscale_(*optimizer);  // clip the true gradients, not the scaled ones
    const std::vector<Tensor> params = optimizer->master_params();
    if (config.clip_grad_norm > 0)
      optim::clip_grad_norm_(params, config.clip_grad_norm);
    else
      optim::clip_grad_value_(params, config.clip_grad_value);
  }
  scaler->step(*optimizer);
  scaler->update();
  optimizer->zero_grad();  // to None
  schedule->after_step();
  ++step;
}

// The progress line after each micro-batch: counts and rates from the host's clock, the
// loss as last read at a log step (no read here).
void Trainer::State::show_progress(int64_t epoch_number, int64_t batches_done, int64_t batches,
                                   Clock::time_point epoch_start, int64_t epoch_samples) {
  if (config.profile_steps > 0) return;
  const double elapsed = seconds_since(epoch_start);
  const double rate = elapsed > 0 ? static_cast<double>(epoch_samples) / elapsed : 0;
  const double eta = batches_done > 0 ? elapsed / static_cast<double>(batches_done) *
                                            static_cast<double>(batches - batches_done)
                                      : 0;
  progress.update({.epoch = epoch_number,
                   .epochs = config.epochs,
                   .step = batches_done,
                   .steps = batches,
                   .samples_per_s = rate,
                   .loss = std::isnan(last_loss) ? std::nullopt : std::optional<double>(last_loss),
                   .lr = schedule->lr(),
                   .eta_s = eta});
}

// A log step: the running loss and accuracy read back (the loop's one sync), to the
// per-step CSV and TensorBoard.
void Trainer::State::log_step(int64_t epoch_number, int64_t batches_done) {
  last_loss = seen > 0 ? loss_sum.item<double>() / static_cast<double>(seen) : kNaN;
  last_acc = label_elements > 0
                 ? static_cast<double>(correct.item<int64_t>()) / static_cast<double>(label_elements)
                 : kNaN;
  if (steps_csv) {
    steps_csv->add_row({{"step", static_cast<double>(step)},
                        {"epoch", static_cast<double>(epoch_number)},
                        {"batch", static_cast<double>(batches_done)},
                        {"lr", schedule->lr()},
                        {"train/loss", last_loss},
                        {"train/acc", last_acc}});
  }
  if (tensorboard) tensorboard->add_scalar("loss/train_running", last_loss, step);
}

// One epoch's training (Note [A training step]); stops after `steps_limit` micro-batches
// when it is positive (--profile-steps).
void Trainer::State::train_epoch(int64_t epoch_number, int64_t steps_limit) {
  model->train();
  const int64_t batches = train_loader->size();
  const int64_t first = batch;
  if (first == 0) reset_running_sums();
  train_batches->start(epoch_number, first);
  const Clock::time_point start = Clock::now();
  int64_t done = first, epoch_samples = 0;
  DeferIndexChecks deferred;  // a GPU's index checks read back at log steps, not every step
  while (std::optional<data::Batch> next = train_batches->next()) {
    const HostSyncs syncs_before = host_syncs();
    const Tensor& x = next->at("image");
    const Tensor& y = next->at("label");
    const bool boundary = (done + 1) % config.accumulate == 0 || done + 1 == batches;
    std::optional<dist::DistributedDataParallel::NoSync> no_sync;  // DDP: all-reduce at steps only
    if (ddp && !boundary) no_sync.emplace(*ddp);
    Tensor logits, loss;
    {
      const TimeRange range(phase::kForward, device);
      const AutocastGuard autocast(amp.low_dtype, amp.enabled_autocast);
      logits = amp_forward(ddp ? static_cast<nn::Layer&>(*ddp) : *model, amp, x);
      loss = objective->loss(logits, y);
    }
    {
      const TimeRange range(phase::kBackward, device);
      const Tensor scaled = config.accumulate > 1 ? div(loss, static_cast<double>(config.accumulate)) : loss;
      scaler->scale(scaled).backward();
    }
    no_sync.reset();
    ++done;
    if (boundary) optimizer_step();
    {
      const NoGradGuard no_grad;
      const int64_t n = y.size(0);
      loss_sum.add_(mul(loss.detach(), static_cast<double>(n)));
      correct.add_(objective->correct(logits.detach(), y));
      seen += n;
      label_elements += y.numel();
      epoch_samples += n;
    }
    ++micro_batches;
    trained_samples += y.size(0);
    const bool logs = (micro_batches % config.log_every == 0) || done == batches;
    if (logs) {
      deferred.check();
      log_step(epoch_number, done);
    }
    show_progress(epoch_number, done, batches, start, epoch_samples);
    if (!logs) {
      quiet_syncs += host_syncs() - syncs_before;
      ++quiet_steps;
    }
    batch = done == batches ? 0 : done;
    if (config.checkpoint_every > 0 && boundary && batch > 0 && step % config.checkpoint_every == 0 &&
        config.profile_steps == 0) {
      deferred.check();  // a checkpoint never holds weights a bad index has touched
      save_checkpoint(epoch_number, batch);
    }
    if (steps_limit > 0 && micro_batches >= steps_limit) break;
  }
  deferred.check();
}

bool Trainer::State::validate_and_select(int64_t epoch_number, double train_loss, double train_acc,
                                         double seconds, double samples_per_s) {
  double val_loss = kNaN, val_auc = kNaN, val_acc = kNaN;
  bool stop = false;
  const bool validates = epoch_number % config.eval_every == 0 || epoch_number == config.epochs;
  if (validates) {
    SplitEvaluation val;
    {
      const TimeRange range(phase::kEvaluation);
      share_rank0_buffers();
      val = evaluate_split(*model, *val_batches, *objective, amp, data.task);
    }
    const std::vector<double> agreed = rank0_values({val.loss, val.metrics.auc, val.metrics.acc});
    val_loss = agreed[0];
    val_auc = agreed[1];
    val_acc = agreed[2];
    const double metric = config.monitor == "auc" ? val_auc : config.monitor == "acc" ? val_acc : val_loss;
    schedule->after_validation(metric);
    if (improves(metric, best_metric, higher_is_better)) {
      best_metric = metric;
      best_epoch = epoch_number;
      bad_validations = 0;
      save_best_weights();
    } else {
      ++bad_validations;
      stop = config.patience > 0 && bad_validations >= config.patience;
    }
  }
  schedule->after_epoch();
  const double loss_scale = scaler->is_enabled() ? scaler->get_scale() : 1.0;
  char line[256];
  std::snprintf(line, sizeof line,
                "epoch %lld/%lld  train loss %.4f acc %.4f  val loss %.4f auc %.4f acc %.4f  %.1f s  %.1f "
                "samples/s%s\n",
                static_cast<long long>(epoch_number), static_cast<long long>(config.epochs), train_loss,
                train_acc, val_loss, val_auc, val_acc, seconds, samples_per_s,
                best_epoch == epoch_number ? "  (best)" : "");
  out << line;
  const std::vector<std::pair<std::string, double>> row = {{"epoch", static_cast<double>(epoch_number)},
                                                           {"lr", schedule->lr()},
                                                           {"train/loss", train_loss},
                                                           {"train/acc", train_acc},
                                                           {"val/loss", val_loss},
                                                           {"val/auc", val_auc},
                                                           {"val/acc", val_acc},
                                                           {"seconds", seconds},
                                                           {"samples_per_s", samples_per_s},
                                                           {"loss_scale", loss_scale}};
  if (epochs_csv) epochs_csv->add_row(row);
  if (tensorboard) {
    for (const auto& [name, value] : row) {
      if (name != "epoch" && std::isfinite(value)) tensorboard->add_scalar(name, value, epoch_number);
    }
    tensorboard->flush();
  }
  return stop;
}

BottleneckReport Trainer::State::report(const std::vector<TimeRangeRecord>& ranges, double wall,
                                        int64_t steps, const HostSyncs& syncs) const {
  return bottleneck_report(ranges, wall, steps, syncs,
                           {.on_gpu = device.is_cuda(),
                            .workers = config.workers,
                            .pin_memory = config.pin_memory && device.is_cuda()});
}

std::vector<TestResult> Trainer::State::test() {
  const TimeRange range(phase::kEvaluation);
  std::vector<TestResult> results;
  const auto run = [&](const std::string& weights, int64_t from_epoch) {
    TestResult result{
        .weights = weights, .epoch = from_epoch, .metrics = {}, .threshold = kNaN, .acc_at_threshold = kNaN};
    const SplitEvaluation test_split = evaluate_split(*model, *test_batches, *objective, amp, data.task);
    result.metrics = test_split.metrics;
    if (data.task == Task::Binary) {
      const SplitEvaluation val = evaluate_split(*model, *val_batches, *objective, amp, data.task);
      result.threshold = youden_threshold(label_vector(val.labels), positive_scores(val.scores));
      result.acc_at_threshold =
          accuracy_at(label_vector(test_split.labels), positive_scores(test_split.scores), result.threshold);
    }
    results.push_back(result);
  };
  const nn::StateDict final_state = clone_state(model->state_dict());
  if (!best_state.empty()) {
    model->load_state_dict(best_state);
    run("best", best_epoch);
    model->load_state_dict(final_state);
  }
  run("final", epoch);
  return results;
}

// ---- Trainer ---------------------------------------------------------------------------

Trainer::Trainer(TrainConfig config, TrainData data, std::shared_ptr<nn::Layer> model, TrainerOutput output)
    : state_(std::make_unique<State>(std::move(config), std::move(data), std::move(model), output)) {
  state_->setup();
}

Trainer::~Trainer() = default;

nn::Layer& Trainer::model() { return *state_->model; }
Device Trainer::device() const { return state_->device; }
const std::string& Trainer::run_dir() const { return state_->run_dir; }

RunSummary Trainer::fit() {
  State& s = *state_;
  const TrainConfig& config = s.config;
  const std::optional<std::string> checkpoint = s.checkpoint_to_resume();
  s.open_run_folder(checkpoint.has_value());
  if (checkpoint)
    s.resume(*checkpoint);
  else
    s.open_logs(nullptr);

  RunSummary summary;
  summary.run_dir = s.run_dir;
  summary.stopped = "completed";
  const Clock::time_point run_start = Clock::now();
  if (s.stopped_early) summary.stopped = "early stopping";  // a resumed run that had stopped
  for (int64_t epoch = s.epoch + 1; epoch <= config.epochs && !s.stopped_early; ++epoch) {
    Timeline timeline;
    const Clock::time_point start = Clock::now();
    const int64_t samples_before = s.trained_samples;
    const HostSyncs quiet_before = s.quiet_syncs;
    s.train_epoch(epoch, config.profile_steps);
    const double train_seconds = seconds_since(start);
    const double rate =
        train_seconds > 0 ? static_cast<double>(s.trained_samples - samples_before) / train_seconds : 0;
    s.train_phase_seconds += train_seconds;
    if (config.profile_steps > 0) {
      std::vector<TimeRangeRecord> ranges = timeline.stop();
      add_phase_totals(s.records, ranges);
      s.wall_seconds += train_seconds;
      summary.stopped = "profile";
      break;
    }
    // The epoch's last micro-batch always logs: its read of the running sums is the epoch's.
    const bool stop = s.validate_and_select(epoch, s.last_loss, s.last_acc, seconds_since(start), rate);
    s.stopped_early = stop;
    s.epoch = epoch;
    s.batch = 0;
    s.save_checkpoint(epoch, 0);
    std::vector<TimeRangeRecord> ranges = timeline.stop();
    const double epoch_wall = seconds_since(start);
    s.out << format_bottleneck_report(
        s.report(ranges, epoch_wall, s.train_loader->size(), s.quiet_syncs - quiet_before));
    add_phase_totals(s.records, ranges);
    s.wall_seconds += epoch_wall;
    if (stop) {
      summary.stopped = "early stopping";
      s.out << "early stopping: no better val " << config.monitor << " for " << config.patience
            << " validations\n";
      break;
    }
  }
  summary.epochs = s.epoch;
  summary.steps = s.step;
  summary.best_epoch = s.best_epoch;
  summary.best_metric = s.best_metric;
  summary.train_seconds = seconds_since(run_start);
  summary.samples_per_s =
      s.train_phase_seconds > 0 ? static_cast<double>(s.trained_samples) / s.train_phase_seconds : 0;
  summary.quiet_steps = s.quiet_steps;
  summary.quiet_step_syncs = s.quiet_syncs.total();
  summary.report = s.report(s.records, s.wall_seconds, s.micro_batches, s.quiet_syncs);
  if (summary.stopped != "profile") {
    summary.test = s.test();
    if (!s.distributed.writes()) return summary;
    if (!config.algo_cache.empty() && s.device.is_cuda()) cudnn::save_algorithm_cache(config.algo_cache);
    nn::save_weights(*s.model, (fs::path(s.run_dir) / "final.safetensors").string(),
                     {{"epoch", std::to_string(s.epoch)}, {kWeightsConfigKey, json::dump(to_json(config))}});
    save_atomically(json::dump(to_json(summary, config), 2) + "\n",
                    (fs::path(s.run_dir) / "summary.json").string(), "kiln train");
  }
  return summary;
}

}  // namespace kiln::train
