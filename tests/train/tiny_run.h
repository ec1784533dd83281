// A tiny training run for the trainer's tests: synthetic 8^3 volumes, a ResNet-10 at a
// sixteenth of its width, batches of 8, no loader threads, on the CPU, one epoch (tests
// change what they need), run under a watchdog with its output kept.
#pragma once

#include <chrono>
#include <sstream>
#include <string>

#include "tests/test_util.h"
#include "train/model_setup.h"
#include "train/trainer.h"

namespace kiln::testing {

inline train::TrainConfig tiny_run_config(const std::string& out) {
  train::TrainConfig config;
  config.size = 8;
  config.synthetic_samples = 32;
  config.model = "resnet10";
  config.width = 0.0625;
  config.batch_size = 8;
  config.workers = 0;
  config.epochs = 1;
  config.device = "cpu";
  config.out = out;
  return config;
}

struct TinyRun {
  train::RunSummary summary;
  std::string output;
};

// The run on `data` (the configuration's own when null).
inline TinyRun run_tiny(const train::TrainConfig& config, const train::TrainData* data = nullptr) {
  TinyRun run;
  std::ostringstream out;
  with_watchdog(std::chrono::seconds(120), [&] {
    const train::TrainData own = data ? train::TrainData{} : train::make_train_data(config);
    const train::TrainData& used = data ? *data : own;
    train::Trainer trainer(config, used, train::make_model(config, used).model, {.out = &out});
    run.summary = trainer.fit();
  });
  run.output = out.str();
  return run;
}

}  // namespace kiln::testing
