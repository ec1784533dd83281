// RunContext: what a training run is, resolved once by the command that starts it and
// passed to the Trainer: the configuration with its choices parsed (validate), the
// distributed group joined (train/distributed.h), the device, the mixed-precision settings
// (train/amp.h) and the run folder. Nothing in it is validated, joined or resolved again.
//
//   train::RunContext run = train::resolve_run(config);  // errors name the setting
//   train::Trainer trainer(std::move(run), data, model);
#pragma once

#include <string>

#include "core/device.h"
#include "train/amp.h"
#include "train/config.h"
#include "train/distributed.h"
#include "train/run_folder.h"

namespace kiln::train {

struct RunContext {
  TrainConfig config;
  Choices choices;
  DistributedRun distributed;
  Device device;
  AmpProperties amp;  // of the level and low dtype chosen (amp_properties)
  RunFolder folder;
  // Whether this process writes the run folder: rank 0, and not a --profile-steps run
  // (which writes nothing).
  bool writes_files() const { return distributed.writes() && config.profile_steps == 0; }
};

// validate(config), join_distributed, run_device, amp_properties and the run folder; one's
// own scans' --dataset made absolute.
RunContext resolve_run(TrainConfig config);

// "auto": the GPU when there is one, else the CPU; otherwise Device::parse.
Device resolve_device(const std::string& name);
// config.out, or runs/<dataset>-<model> (a dataset given as a path by its file or folder
// name without extension: runs/scans-resnet18 for /data/scans.csv).
std::string run_folder(const TrainConfig& config);

}  // namespace kiln::train
