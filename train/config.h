// TrainConfig: everything a training run is made of, as one flat set of named settings, so
// that a flag (`--batch-size 64`), a key of a JSON configuration file ("batch-size": 64)
// and a line of the resolved configuration a run saves are the same name.
//
//   train::TrainConfig config;                    // the defaults
//   train::apply_recipe("medmnist", config);      // a published recipe's settings
//   train::update_from_json(config, json::parse(text), "run.json");
//   const train::Choices choices = train::validate(config);  // every choice as an enum
//   std::cout << json::dump(train::to_json(config), 2);
//
// Note [Configuration fields]: config_fields() lists every setting once: its name, its
// group (for --help), its help text and a pointer to its member. The JSON reader and
// writer, the command line's options (tools/) and the resume check (Note [Resuming a
// different run] in train/checkpoint.h) all walk that one table, so a new setting is one
// member and one row. A field marked `identity` defines what is being trained (the model,
// the data, the optimizer...): a checkpoint made with a different value is refused. The
// others (epochs, workers, log intervals, the device...) may change when a run resumes.
//
// Settings whose meaning depends on another (a scheduler's options) are plain fields; the
// trainer reads those its choices use and ignores the rest, as PyTorch's own schedulers
// ignore keywords they do not take.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/json.h"
#include "train/choices.h"
#include "train/preprocessing.h"

namespace kiln::train {

struct TrainConfig {
  // data
  std::string dataset = "synthetic";  // a MedMNIST 3D flag (adrenalmnist3d, ...), "synthetic", or a
                                      // CSV manifest or folder of one's own scans (train/scans.h)
  int64_t size = 28;                  // MedMNIST: 28 or 64; synthetic: the cube's side
  std::string data_root = "";         // MedMNIST's folder; empty: $MEDMNIST_ROOT, else ~/.medmnist
  bool download = false;              // fetch a missing MedMNIST file
  int64_t synthetic_samples = 512;    // synthetic: training samples (validation and test: a quarter each)
  bool augment = true;                // MedMNIST's training shape transform; random flips otherwise
  // one's own scans (train/scans.h, train/preprocessing.h)
  std::string task = "auto";              // auto, classification, multi-label, regression
  std::string image_columns = "image";    // manifest columns of image files (several: channels)
  std::string label_columns = "label";    // manifest columns of labels (several: multi-label or targets)
  std::string class_names = "";           // the classes in a stated order (else: the labels found, sorted)
  double val_fraction = 0.1;              // without a split column or split folders: stratified by class
  double test_fraction = 0.2;
  int64_t split_seed = 0;                 // the seeded shuffle of that split
  std::string orientation = "stored";     // stored or RAS
  std::string spacing = "";               // MM or MM,MM,MM: resampled from the NIfTI header
  std::string normalize = "auto";         // auto (zscore), zscore, minmax, window:LO,HI, scale:F, none
  std::string crop_pad = "";              // D,H,W: padded and centre-cropped to that size
  std::string resize = "";                // D,H,W: resampled to that size
  int64_t cache_mb = 0;                   // decoded volumes kept in memory, up to this many MiB
  bool check_data = false;                // read every header, report every problem, and stop
  int64_t batch_size = 32;
  bool drop_last = false;  // training: leave out the last, smaller batch
  int64_t workers = 2;
  int64_t prefetch_factor = 2;
  bool pin_memory = true;  // with a GPU: batches collated into pinned memory
  bool persistent_workers = true;
  bool device_prefetch = true;  // with a GPU: batch i+1 copied on a copy stream while batch i trains
  // model
  std::string model = "resnet18";
  std::string stem = "";  // empty: the model's default (nn/models/by_name.h)
  double width = 1.0;
  double dropout = 0.0;
  bool checkpoint_activations = false;
  bool memory_efficient = false;
  bool dsconv = false;
  std::string activation = "relu";
  bool fused_bn_relu = false;
  std::string pretrained = "";  // a safetensors or .pth file loaded by name before training
  bool pretrained_partial = false;  // train even when --pretrained fills less than half of the model
  // loss
  std::string loss = "auto";  // auto, cross-entropy, bce, multilabel-bce, mse
  std::vector<double> class_weights = {};
  double label_smoothing = 0.0;
  std::string pos_weight = "";  // bce: a number, or "auto" (negatives / positives of the training set)
  // optimizer
  std::string optimizer = "adam";  // sgd, adam, adamw, rmsprop
  double lr = 1e-3;
  double momentum = 0.0;  // sgd, rmsprop
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999;  // adam, adamw
  double eps = 1e-8;                  // adam, adamw, rmsprop
  double alpha = 0.99;                // rmsprop
  // scheduler
  std::string scheduler =
      "none";  // none, step, multistep, exponential, cosine, linear, cyclic, onecycle, plateau
  std::vector<double> milestones = {};     // multistep: epochs, or fractions of --epochs when all are below 1
  double gamma = 0.1;                      // step, multistep, exponential (and cyclic's exp_range)
  int64_t step_size = 30;                  // step: epochs
  double min_lr = 0.0;                     // cosine's eta_min, cyclic's base_lr, plateau's min_lr
  double max_lr = 0.0;                     // cyclic, onecycle; 0: 10 x --lr
  std::string cyclic_mode = "triangular";  // triangular, triangular2, exp_range
  int64_t step_size_up = 0;                // cyclic: batches; 0: one epoch
  bool cycle_momentum = true;              // cyclic, onecycle: momentum (or Adam's beta1) cycles inversely
  double pct_start = 0.3;                  // onecycle
  int64_t plateau_patience = 10;
  double plateau_factor = 0.1;
  // training
  int64_t epochs = 10;
  int64_t accumulate = 1;
  double clip_grad_norm = 0.0;    // 0: off
  double clip_grad_value = 0.0;   // 0: off
  std::string amp = "O0";         // O0, O1, O2, O3 (train/amp.h)
  std::string amp_dtype = "auto";  // auto (bf16 on the CPU, f16 on a GPU), f16 or bf16
  bool cudnn_benchmark = false;
  bool cuda_graphs = false;  // each step captured as one CUDA graph and replayed (train/graphed_step.h)
  bool channels_last = false;  // weights and activations laid out NDHWC (Note [Channels-last training])
  std::string algo_cache = "";  // cuDNN's algorithm cache file, loaded at start and saved at the end
  bool deterministic = false;
  int64_t seed = 0;
  std::string device = "auto";  // auto (cuda when there is one), cpu, cuda, cuda:N
  bool ddp = false;                  // data-parallel across the processes `kiln launch` starts (train/distributed.h)
  bool sync_bn = false;              // with ddp: batch-norm statistics over every rank's batch
  std::string dist_backend = "auto";  // auto (nccl on GPUs, else ring), ring or nccl
  std::string monitor = "auto";  // the validation metric choosing the best model (train/choices.h)
  int64_t patience = 0;         // early stopping: epochs without a better validation metric; 0: off
  int64_t eval_every = 1;       // epochs between validations
  // logs and checkpoints
  std::string out = "";    // the run folder; empty: runs/<dataset>-<model>
  bool overwrite = false;  // start afresh in a run folder that holds a run
  int64_t log_every = 50;  // steps between reads of the running loss (the only host syncs in the loop)
  bool csv_per_step = false;
  bool tensorboard = true;
  int64_t checkpoint_every = 0;  // steps between mid-epoch checkpoints; 0: at the end of each epoch only
  int64_t keep_last = 2;         // checkpoints kept (the best model's weights are kept apart)
  std::string resume = "";       // a checkpoint file, or "auto": the run folder's latest
  int64_t profile_steps = 0;     // run this many steps, print the bottleneck report, stop
};

using FieldMember = std::variant<std::string TrainConfig::*, int64_t TrainConfig::*, double TrainConfig::*,
                                 bool TrainConfig::*, std::vector<double> TrainConfig::*>;

struct ConfigField {
  const char* name;   // the flag without "--" and the JSON key: "batch-size"
  const char* group;  // data, model, loss, optimizer, scheduler, training, logs
  const char* help;
  FieldMember member;
  bool identity = true;  // Note [Configuration fields]
  // A choice's names from its table (train/choices.h), for --help; null for other fields.
  std::string (*choices)() = nullptr;
};

// Note [Configuration fields].
const std::vector<ConfigField>& config_fields();
const ConfigField* find_config_field(std::string_view name);

// The whole configuration, every field, in config_fields() order.
json::Value to_json(const TrainConfig& config);
// The identity fields alone (Note [Configuration fields]): what a run folder's marker
// records of the run (train/run_folder.h).
json::Value identity_json(const TrainConfig& config);
// Sets the fields the object names; an unknown key or a value of the wrong type is an error
// naming `source`, the key and what was expected.
void update_from_json(TrainConfig& config, const json::Value& object, const std::string& source);
// A field's value as JSON, and as text for messages.
json::Value field_value(const TrainConfig& config, const ConfigField& field);
std::string field_text(const TrainConfig& config, const ConfigField& field);

// "medmnist": the MedMNIST v2 benchmark's 3D training (experiments/MedMNIST3D/train_and_eval_pytorch.py):
// Adam 1e-3, batch 32, 100 epochs, MultiStepLR x0.1 at 50% and 75% of the epochs,
// cross-entropy, the best model by validation AUC, ResNet-18 with MedMNIST's stem. An
// unknown recipe is an error listing the recipes.
void apply_recipe(std::string_view recipe, TrainConfig& config);
std::vector<std::string> recipe_names();

// Every choice of a configuration as its enum (train/choices.h): what validate() returns,
// and what the run switches on.
struct Choices {
  Optimizer optimizer = Optimizer::Adam;
  Scheduler scheduler = Scheduler::None;
  optim::CyclicMode cyclic_mode = optim::CyclicMode::Triangular;
  LossChoice loss = LossChoice::Auto;
  Monitor monitor = Monitor::Auto;
  OptLevel amp = OptLevel::O0;
  LowPrecision amp_dtype = LowPrecision::Auto;
  DistBackend dist_backend = DistBackend::Auto;
  TaskChoice task = TaskChoice::Auto;
  Preprocessing preprocessing = {};
};

// Checks the values that do not depend on the machine (names of choices, ranges) and
// returns the choices parsed; an error names the setting and what is valid.
Choices validate(const TrainConfig& config);

}  // namespace kiln::train
