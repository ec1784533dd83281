// TrainConfig's field table (Note [Configuration fields] in train/config.h), its JSON both
// ways, the recipes and the checks of values.
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/text_list.h"
#include "train/schedule.h"

namespace kiln::train {
namespace {

using C = TrainConfig;

template <typename T>
void check_at_least(const TrainConfig& config, T C::*member, const char* name, T minimum) {
  KILN_CHECK(config.*member >= minimum, "config: ", name, " must be at least ", minimum, ", got ",
             config.*member);
}

void check_finite_non_negative(const TrainConfig& config, double C::*member, const char* name) {
  KILN_CHECK(std::isfinite(config.*member) && config.*member >= 0, "config: ", name,
             " must be a finite number >= 0, got ", config.*member);
}

// A JSON value as the field's type; the error names the source and the key.
void set_field(TrainConfig& config, const ConfigField& field, const json::Value& value,
               const std::string& source) {
  const auto expected = [&](const char* what) {
    return Error(source + ": \"" + field.name + "\" must be " + what + ", got " + json::dump(value));
  };
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!value.is(json::Type::String)) throw expected("a string");
          // No setting holds a control character; one (a NUL) would cut every message
          // that names the value short, so it is refused here, escaped.
          const std::string& text = value.as_string();
          if (std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
            throw expected("text without control characters");
          config.*member = text;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (!value.is(json::Type::Integer)) throw expected("an integer");
          config.*member = value.as_integer();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!value.is(json::Type::Integer) && !value.is(json::Type::Number)) throw expected("a number");
          config.*member = value.as_number();
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!value.is(json::Type::Bool)) throw expected("true or false");
          config.*member = value.as_bool();
        } else {
          if (!value.is(json::Type::Array)) throw expected("an array of numbers");
          std::vector<double> numbers;
          for (const json::Value& item : value.as_array()) {
            if (!item.is(json::Type::Integer) && !item.is(json::Type::Number))
              throw expected("an array of numbers");
            numbers.push_back(item.as_number());
          }
          config.*member = std::move(numbers);
        }
      },
      field.member);
}

}  // namespace

const std::vector<ConfigField>& config_fields() {
  static const std::vector<ConfigField> fields = {
      {"dataset", "data",
       "a MedMNIST 3D flag (adrenalmnist3d, vesselmnist3d, ...), synthetic, or your own scans: a CSV manifest or "
       "a folder of class folders",
       &C::dataset},
      {"size", "data", "MedMNIST: 28 or 64; synthetic: the volumes' side", &C::size},
      {"data-root", "data", "MedMNIST's folder (default $MEDMNIST_ROOT, else ~/.medmnist)", &C::data_root,
       false},
      {"download", "data", "fetch a missing MedMNIST file (MD5-checked)", &C::download, false},
      {"synthetic-samples", "data", "synthetic: training volumes (validation and test: a quarter each)",
       &C::synthetic_samples},
      {"augment", "data", "augment the training set (MedMNIST's shape transform, random flips)", &C::augment},
      {"task", "data", "your own scans: what the labels are (auto: a class per scan from one label column, "
                       "multi-label from several)", &C::task, true, &choice_list<TaskChoice>},
      {"image-columns", "data", "your manifest: the columns of image files, comma-separated (several: channels)",
       &C::image_columns},
      {"label-columns", "data", "your manifest: the columns of labels, comma-separated", &C::label_columns},
      {"class-names", "data", "your scans: the classes in order, comma-separated (default: the labels found, sorted)",
       &C::class_names},
      {"val-fraction", "data", "your scans without given splits: the validation share, stratified by class",
       &C::val_fraction},
      {"test-fraction", "data", "your scans without given splits: the test share, stratified by class",
       &C::test_fraction},
      {"split-seed", "data", "your scans without given splits: the seed of the split's shuffle", &C::split_seed},
      {"orientation", "data", "your scans: as the files store them, or reoriented to RAS (as nibabel's canonical)",
       &C::orientation, true, &choice_list<Orientation>},
      {"spacing", "data", "your scans: resample to MM or MM,MM,MM voxels (from the NIfTI header)", &C::spacing},
      {"normalize", "data", "your scans: auto (zscore), zscore, minmax, window:LO,HI (a CT window), scale:F, none",
       &C::normalize},
      {"crop-pad", "data", "your scans: pad and centre-crop to D,H,W", &C::crop_pad},
      {"resize", "data", "your scans: resample to D,H,W voxels (trilinear)", &C::resize},
      {"cache-mb", "data", "your scans: keep decoded volumes in memory, up to this many MiB", &C::cache_mb, false},
      {"check-data", "data", "read every scan's header, report every problem, and stop", &C::check_data, false},
      {"batch-size", "data", "samples per micro-batch", &C::batch_size},
      {"drop-last", "data", "training: leave out the last batch when it is smaller", &C::drop_last},
      {"workers", "data", "loader worker threads (0: load in the training thread)", &C::workers, false},
      {"prefetch-factor", "data", "batches each worker loads ahead", &C::prefetch_factor, false},
      {"pin-memory", "data", "with a GPU: collate into pinned memory (asynchronous copies)", &C::pin_memory,
       false},
      {"persistent-workers", "data", "keep the workers between epochs", &C::persistent_workers, false},
      {"device-prefetch", "data", "with a GPU: copy the next batch on a copy stream during this one",
       &C::device_prefetch, false},
      {"model", "model", "resnet10..resnet200, densenet121..densenet264", &C::model},
      {"stem", "model", "resnet: medmnist or medicalnet; densenet: standard or small (default: the model's)",
       &C::stem},
      {"width", "model", "scales the model's channels", &C::width},
      {"dropout", "model", "dropout rate (resnet: before the classifier; densenet: per dense layer)",
       &C::dropout},
      {"checkpoint-activations", "model", "recompute activations in backward instead of keeping them",
       &C::checkpoint_activations, false},
      {"memory-efficient", "model", "densenet: checkpointed dense layers", &C::memory_efficient, false},
      {"dsconv", "model", "densenet: depthwise-separable 3x3x3 convolutions", &C::dsconv},
      {"activation", "model", "densenet: relu, swish or prelu", &C::activation},
      {"fused-bn-relu", "model", "batch norm and ReLU (and a ResNet block's residual add) as one fused op", &C::fused_bn_relu},
      {"pretrained", "model", "weights to start from (safetensors or PyTorch .pth), loaded by name",
       &C::pretrained},
      {"pretrained-partial", "model",
       "train even when --pretrained fills less than half of the model's tensors (a head or stem replaced on purpose)",
       &C::pretrained_partial, false},
      {"loss", "loss", "the loss (auto: the task's: cross-entropy, multilabel-bce for multi-label, mse for "
                       "regression)", &C::loss, true, &choice_list<LossChoice>},
      {"class-weights", "loss", "cross-entropy: one weight per class", &C::class_weights},
      {"label-smoothing", "loss", "cross-entropy: label smoothing in [0, 1]", &C::label_smoothing},
      {"pos-weight", "loss", "bce: the positives' weight, a number or auto (negatives / positives)",
       &C::pos_weight},
      {"optimizer", "optimizer", "the optimizer", &C::optimizer, true, &choice_list<Optimizer>},
      {"lr", "optimizer", "learning rate", &C::lr},
      {"momentum", "optimizer", "sgd, rmsprop: momentum", &C::momentum},
      {"nesterov", "optimizer", "sgd: Nesterov momentum", &C::nesterov},
      {"weight-decay", "optimizer", "weight decay (adamw: decoupled)", &C::weight_decay},
      {"beta1", "optimizer", "adam, adamw: beta1", &C::beta1},
      {"beta2", "optimizer", "adam, adamw: beta2", &C::beta2},
      {"eps", "optimizer", "adam, adamw, rmsprop: epsilon", &C::eps},
      {"alpha", "optimizer", "rmsprop: smoothing constant", &C::alpha},
      {"scheduler", "scheduler",
       "the learning-rate schedule: per epoch (step, multistep, exponential, cosine, linear), per batch (cyclic, "
       "onecycle), or on the monitored metric (plateau)",
       &C::scheduler, true, &choice_list<Scheduler>},
      {"milestones", "scheduler", "multistep: epochs, or fractions of --epochs when all are below 1",
       &C::milestones},
      {"gamma", "scheduler", "step, multistep, exponential: the factor; cyclic exp_range: the base",
       &C::gamma},
      {"step-size", "scheduler", "step: epochs between decays", &C::step_size},
      {"min-lr", "scheduler", "cosine: eta_min; cyclic: base_lr; plateau: the floor", &C::min_lr},
      {"max-lr", "scheduler", "cyclic, onecycle: the peak (0: 10 x --lr)", &C::max_lr},
      {"cyclic-mode", "scheduler", "cyclic: the cycle's shape", &C::cyclic_mode, true,
       &choice_list<optim::CyclicMode>},
      {"step-size-up", "scheduler", "cyclic: batches from base to max (0: one epoch)", &C::step_size_up},
      {"cycle-momentum", "scheduler", "cyclic, onecycle: cycle momentum (Adam: beta1) inversely to the lr",
       &C::cycle_momentum},
      {"pct-start", "scheduler", "onecycle: the fraction of steps rising", &C::pct_start},
      {"plateau-patience", "scheduler", "plateau: epochs without improvement before a decay",
       &C::plateau_patience},
      {"plateau-factor", "scheduler", "plateau: the decay factor", &C::plateau_factor},
      {"epochs", "training", "epochs to train", &C::epochs, false},
      {"accumulate", "training", "micro-batches per optimizer step (the loss is divided by it)",
       &C::accumulate},
      {"clip-grad-norm", "training", "clip the gradients' total norm to this (after unscaling; 0: off)",
       &C::clip_grad_norm},
      {"clip-grad-value", "training", "clip each gradient element to +-this (after unscaling; 0: off)",
       &C::clip_grad_value},
      {"amp", "training", "mixed precision: O0 (off), O1 (autocast), O2 (half model, float32 masters), O3 (half)",
       &C::amp, true, &choice_list<OptLevel>},
      {"amp-dtype", "training", "the low precision: auto (bf16 on the CPU, f16 on a GPU), f16 (with a dynamic loss scale) or bf16", &C::amp_dtype, true,
       &choice_list<LowPrecision>},
      {"cudnn-benchmark", "training", "time cuDNN's algorithms once per shape and keep the fastest",
       &C::cudnn_benchmark, false},
      {"cuda-graphs", "training",
       "capture each training step as one CUDA graph and replay it (GPU; warm-up steps and other batch shapes run "
       "eagerly)",
       &C::cuda_graphs, false},
      {"channels-last", "training",
       "lay out the weights and activations channels-last (NDHWC), as cuDNN's fastest 3D convolutions want them",
       &C::channels_last, false},
      {"algo-cache", "training", "cuDNN algorithm cache file, loaded at start and saved at the end",
       &C::algo_cache, false},
      {"deterministic", "training", "deterministic algorithms only", &C::deterministic},
      {"seed", "training", "seeds the initialisation, the shuffle, augmentation and dropout", &C::seed},
      {"device", "training", "auto, cpu, cuda or cuda:N", &C::device, false},
      {"ddp", "training", "data-parallel over the processes kiln launch starts (gradients averaged)", &C::ddp, false},
      {"sync-bn", "training", "with --ddp: batch-norm statistics over all ranks' batches", &C::sync_bn, false},
      {"dist-backend", "training", "with --ddp: the collectives (auto: nccl on GPUs, else ring)", &C::dist_backend,
       false, &choice_list<DistBackend>},
      {"monitor", "training", "the validation metric choosing the best model (auto: auc; rmse for regression)",
       &C::monitor, true, &choice_list<Monitor>},
      {"patience", "training", "stop after this many validations without improvement (0: never)",
       &C::patience, false},
      {"eval-every", "training", "epochs between validations", &C::eval_every, false},
      {"out", "logs", "the run folder (default runs/<dataset>-<model>)", &C::out, false},
      {"overwrite", "logs", "start afresh in a run folder that already holds a run", &C::overwrite, false},
      {"log-every", "logs", "steps between reads of the running loss (the loop's only host syncs)",
       &C::log_every, false},
      {"csv-per-step", "logs", "also log each logged step to steps.csv", &C::csv_per_step, false},
      {"tensorboard", "logs", "write TensorBoard event files", &C::tensorboard, false},
      {"checkpoint-every", "logs", "steps between mid-epoch checkpoints (0: at each epoch's end only)",
       &C::checkpoint_every, false},
      {"keep-last", "logs", "the newest checkpoints kept (and the best epoch's)", &C::keep_last, false},
      {"resume", "logs", "a checkpoint to continue from, or auto (the run folder's latest)", &C::resume,
       false},
      {"profile-steps", "logs", "run this many optimizer steps, print where the time went, and stop", &C::profile_steps,
       false},
  };
  return fields;
}

const ConfigField* find_config_field(std::string_view name) {
  for (const ConfigField& field : config_fields()) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

json::Value field_value(const TrainConfig& config, const ConfigField& field) {
  return std::visit(
      [&](auto member) -> json::Value {
        using T = std::remove_cvref_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, std::string>)
          return json::Value::string(config.*member);
        else if constexpr (std::is_same_v<T, int64_t>)
          return json::Value::integer(config.*member);
        else if constexpr (std::is_same_v<T, double>)
          return json::Value::number(config.*member);
        else if constexpr (std::is_same_v<T, bool>)
          return json::Value::boolean(config.*member);
        else {
          json::Value array = json::Value::array();
          for (const double value : config.*member) array.push_back(json::Value::number(value));
          return array;
        }
      },
      field.member);
}

std::string field_text(const TrainConfig& config, const ConfigField& field) {
  const json::Value value = field_value(config, field);
  if (value.is(json::Type::String)) return value.as_string().empty() ? "(none)" : value.as_string();
  if (value.is(json::Type::Number)) {
    std::ostringstream text;
    text << value.as_number();
    return text.str();
  }
  return json::dump(value);
}

json::Value to_json(const TrainConfig& config) {
  json::Value object = json::Value::object();
  for (const ConfigField& field : config_fields()) object.add(field.name, field_value(config, field));
  return object;
}

json::Value identity_json(const TrainConfig& config) {
  json::Value object = json::Value::object();
  for (const ConfigField& field : config_fields()) {
    if (field.identity) object.add(field.name, field_value(config, field));
  }
  return object;
}

void update_from_json(TrainConfig& config, const json::Value& object, const std::string& source) {
  KILN_CHECK(object.is(json::Type::Object), source, ": a configuration is a JSON object of settings, got ",
             json::dump(object));
  for (const auto& [key, value] : object.as_object()) {
    const ConfigField* field = find_config_field(key);
    KILN_CHECK(field != nullptr, source, ": unknown setting \"", json::printable(key),
               "\" (kiln train --help lists them)");
    set_field(config, *field, value, source);
  }
}

std::vector<std::string> recipe_names() { return {"medmnist"}; }

void apply_recipe(std::string_view recipe, TrainConfig& config) {
  KILN_CHECK(recipe == "medmnist", "unknown recipe '", recipe, "' (the recipes are ", joined(recipe_names()),
             ")");
  config.model = "resnet18";
  config.stem = "medmnist";
  config.optimizer = "adam";
  config.lr = 1e-3;
  config.weight_decay = 0;
  config.batch_size = 32;
  config.epochs = 100;
  config.scheduler = "multistep";
  config.milestones = {0.5, 0.75};
  config.gamma = 0.1;
  config.loss = "cross-entropy";
  config.monitor = "auc";
  config.augment = true;
}

Choices validate(const TrainConfig& config) {
  Choices choices{.optimizer = parse_choice<Optimizer>(config.optimizer),
                        .scheduler = parse_choice<Scheduler>(config.scheduler),
                        .cyclic_mode = parse_choice<optim::CyclicMode>(config.cyclic_mode),
                        .loss = parse_choice<LossChoice>(config.loss),
                        .monitor = parse_choice<Monitor>(config.monitor),
                        .amp = parse_choice<OptLevel>(config.amp),
                        .amp_dtype = parse_choice<LowPrecision>(config.amp_dtype),
                        .dist_backend = parse_choice<DistBackend>(config.dist_backend),
                        .task = parse_choice<TaskChoice>(config.task),
                        .preprocessing = parse_preprocessing(config)};
  check_at_least<int64_t>(config, &C::batch_size, "batch-size", 1);
  check_at_least<int64_t>(config, &C::workers, "workers", 0);
  check_at_least<int64_t>(config, &C::prefetch_factor, "prefetch-factor", 1);
  check_at_least<int64_t>(config, &C::epochs, "epochs", 1);
  check_at_least<int64_t>(config, &C::accumulate, "accumulate", 1);
  check_at_least<int64_t>(config, &C::eval_every, "eval-every", 1);
  check_at_least<int64_t>(config, &C::log_every, "log-every", 1);
  check_at_least<int64_t>(config, &C::patience, "patience", 0);
  check_at_least<int64_t>(config, &C::checkpoint_every, "checkpoint-every", 0);
  check_at_least<int64_t>(config, &C::keep_last, "keep-last", 1);
  check_at_least<int64_t>(config, &C::profile_steps, "profile-steps", 0);
  check_at_least<int64_t>(config, &C::synthetic_samples, "synthetic-samples", 4);
  check_at_least<int64_t>(config, &C::step_size, "step-size", 1);
  check_at_least<int64_t>(config, &C::step_size_up, "step-size-up", 0);
  check_at_least<int64_t>(config, &C::plateau_patience, "plateau-patience", 0);
  check_at_least<int64_t>(config, &C::seed, "seed", 0);
  check_at_least<int64_t>(config, &C::split_seed, "split-seed", 0);
  check_at_least<int64_t>(config, &C::cache_mb, "cache-mb", 0);
  KILN_CHECK(config.cache_mb <= (int64_t{1} << 40), "config: cache-mb is at most 2^40, got ", config.cache_mb);
  for (const auto& [value, name] : {std::pair{config.val_fraction, "val-fraction"}, {config.test_fraction, "test-fraction"}})
    KILN_CHECK(std::isfinite(value) && value >= 0 && value < 1, "config: ", name, " is in [0, 1), got ", value);
  KILN_CHECK(config.val_fraction + config.test_fraction < 1, "config: val-fraction + test-fraction leave no training "
             "share (", config.val_fraction, " + ", config.test_fraction, ")");
  const std::pair<double C::*, const char*> non_negative[] = {{&C::lr, "lr"},
                                                              {&C::clip_grad_norm, "clip-grad-norm"},
                                                              {&C::clip_grad_value, "clip-grad-value"},
                                                              {&C::label_smoothing, "label-smoothing"},
                                                              {&C::weight_decay, "weight-decay"},
                                                              {&C::momentum, "momentum"},
                                                              {&C::min_lr, "min-lr"},
                                                              {&C::max_lr, "max-lr"},
                                                              {&C::dropout, "dropout"}};
  for (const auto& [member, name] : non_negative) {
    check_finite_non_negative(config, member, name);
  }
  KILN_CHECK(config.lr > 0, "config: lr must be positive, got ", config.lr);
  KILN_CHECK(config.label_smoothing <= 1, "config: label-smoothing is in [0, 1], got ",
             config.label_smoothing);
  KILN_CHECK(config.dropout < 1, "config: dropout is in [0, 1), got ", config.dropout);
  KILN_CHECK(!config.sync_bn || config.ddp, "config: sync-bn synchronises the ranks of a --ddp run; add --ddp");
  KILN_CHECK(config.clip_grad_norm == 0 || config.clip_grad_value == 0,
             "config: clip-grad-norm and clip-grad-value are alternatives; set one");
  for (const double milestone : config.milestones) {
    KILN_CHECK(std::isfinite(milestone) && milestone > 0, "config: milestones must be positive, got ",
               milestone);
  }
  // Milestones in epochs past the last one never apply (fractions of --epochs scale with it).
  if (choices.scheduler == Scheduler::MultiStep && !schedule_depends_on_epochs(choices.scheduler, config.milestones)) {
    for (const int64_t epoch : milestone_epochs(config.milestones, config.epochs))
      KILN_CHECK(epoch <= config.epochs, "config: a milestone at epoch ", epoch, " of ", config.epochs,
                 " epochs would never apply (milestones are epochs, or fractions of --epochs when all are below 1)");
  }
  double weight_sum = 0;
  for (const double weight : config.class_weights) {
    KILN_CHECK(std::isfinite(weight) && weight >= 0, "config: class-weights must be finite and >= 0, got ", weight);
    weight_sum += weight;
  }
  KILN_CHECK(config.class_weights.empty() || weight_sum > 0,
             "config: class-weights are all 0, which leaves nothing to learn from");
  KILN_CHECK(config.pos_weight.empty() || choices.loss == LossChoice::Bce,
             "config: pos-weight applies to the bce loss (--loss bce), not ", config.loss);
  return choices;
}

}  // namespace kiln::train
