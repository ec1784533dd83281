// Training checkpoints: everything a run needs to continue exactly where it stopped, in
// one safetensors file written atomically (temporary file, fsync, rename, folder fsync:
// core/atomic_file.h), so a process killed while writing one leaves the previous one whole.
//
// Note [Checkpoint layout]: tensors are named by owner: "model.<parameter or buffer>",
// "optimizer.<state name>" (optim/optimizer.h's layout) and "running.<name>" (the epoch's
// device-side running sums, for a checkpoint taken mid-epoch). Everything else is one JSON
// object under the metadata key "kiln.checkpoint":
//   {"format": 1, "config": {...the run's TrainConfig...},
//    "progress": {"epoch": ..., "batch": ..., "step": ..., "best_metric": ..., ...},
//    "optimizer": {param_groups}, "scheduler": {...}, "scaler": {...},
//    "generators": {"cpu": [seed, offset], "cuda:0": [seed, offset], ...},
//    "logs": {"epochs.csv": "...", "steps.csv": "..."}}
// The generators are every default generator (dropout, random ops); the loader has no state
// of its own to save: its order and augmentation are functions of (seed, epoch, index)
// (Note [Loader order and errors] in data/loader.h), and a checkpoint taken mid-epoch
// records how many batches of the epoch are done. The logs are the CSV tables up to the
// checkpoint, so a resumed run's tables hold each row once.
//
// Note [Resuming a different run]: a checkpoint records its configuration; resuming under
// a configuration whose identity fields (Note [Configuration fields] in train/config.h)
// differ is refused, naming each difference ("model: the checkpoint has resnet18, this run
// resnet34"). Epochs, workers, the device and the like may change; the epochs not when the
// schedule is laid out over them (onecycle, cosine, linear, milestones as fractions).
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/safetensors.h"
#include "train/config.h"

namespace kiln::train {

// The safetensors metadata key holding a checkpoint's state (Note [Checkpoint layout]).
inline constexpr const char* kCheckpointMetadataKey = "kiln.checkpoint";

struct CheckpointContents {
  safetensors::NamedTensors tensors;  // Note [Checkpoint layout]
  json::Value state;                  // the "kiln.checkpoint" object
};

// The parts of the "kiln.checkpoint" object and the owners' tensor prefixes (Note
// [Checkpoint layout]): the writer builds the object from kStateParts and read_checkpoint
// checks every part is there, so the two cannot drift apart.
enum class StatePart : uint8_t { Config, Progress, Optimizer, Scheduler, Scaler, Generators, Logs };
inline constexpr const char* kStateParts[] = {"config", "progress", "optimizer", "scheduler",
                                             "scaler", "generators", "logs"};
static_assert(std::size(kStateParts) == static_cast<size_t>(StatePart::Logs) + 1, "one name per StatePart");
using StateParts = std::array<json::Value, std::size(kStateParts)>;
namespace prefix {
inline constexpr const char* kModel = "model.";
inline constexpr const char* kOptimizer = "optimizer.";
inline constexpr const char* kRunning = "running.";
}  // namespace prefix

// The "kiln.checkpoint" object: the format and each part under its name.
json::Value checkpoint_state(StateParts parts);
// A part of a checkpoint read_checkpoint returned (which checked it is there).
const json::Value& state_part(const CheckpointContents& checkpoint, StatePart part);

// Writes `contents` to `path` atomically; returns whether the save is durable (a warning
// to show otherwise). A failure is a kiln::Error naming the file; the previous file at
// `path`, if any, is untouched then.
SaveStatus write_checkpoint(const CheckpointContents& contents, const std::string& path);

// Reads a checkpoint; a file that is not one (no "kiln.checkpoint" metadata, an unknown
// format) is an error naming it. Tensors are loaded onto `device`.
CheckpointContents read_checkpoint(const std::string& path, Device device = Device::cpu());

// The tensors whose names start with `prefix`, with the prefix removed.
safetensors::NamedTensors tensors_under(const safetensors::NamedTensors& tensors, const std::string& prefix);

// Every default generator's (seed, offset), and their restoration.
json::Value generator_states();
void restore_generator_states(const json::Value& states, const std::string& source);

// Note [Resuming a different run]: an error naming every identity field that differs;
// `what` says what `source` is ("checkpoint", or "summary" for a finished run's summary.json).
void check_same_run(const json::Value& saved_config, const TrainConfig& config, const std::string& source,
                    const std::string& what = "checkpoint");

// Checkpoint files in a run folder: checkpoints/epoch-0003.safetensors, or
// epoch-0003-batch-000120.safetensors mid-epoch, so that names sort by progress.
std::string checkpoint_name(int64_t epoch, int64_t batch);
// The folder's checkpoints, oldest first; empty when there is none.
std::vector<std::string> list_checkpoints(const std::string& run_dir);
// Removes all but the newest `keep` checkpoints and the one named `also_keep` (the best
// epoch's, checkpoint_name(best_epoch, 0); empty: none).
void prune_checkpoints(const std::string& run_dir, int64_t keep, const std::string& also_keep = "");

}  // namespace kiln::train
