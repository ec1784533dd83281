// Trainer::State: a run's state, its rooms (train/trainer.h lists them), and how they are
// set up from the run's context, data and model: the objective, the batches, batch norm
// synchronised (--sync-bn), the model on the device, the optimization under the run's
// mixed precision, DDP over it, dropout's generator seeded. The loop that runs over them
// is train/trainer.cpp.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "dist/ddp.h"
#include "train/data_setup.h"
#include "train/graphed_step.h"
#include "train/objective.h"
#include "train/optimization.h"
#include "train/run_checkpoints.h"
#include "train/run_context.h"
#include "train/run_lock.h"
#include "train/run_logs.h"
#include "train/run_progress.h"
#include "train/running_sums.h"
#include "train/task.h"
#include "train/trainer.h"

namespace kiln::train {

struct Trainer::State {
  RunContext run;
  TrainData data;
  std::shared_ptr<nn::Layer> model;
  std::shared_ptr<dist::DistributedDataParallel> ddp;  // wraps `model` in a --ddp run
  Monitor monitor;                                     // resolved for the task
  RunLogs logs;
  RunBatches batches;
  std::unique_ptr<Objective> objective;
  std::unique_ptr<Optimization> optimization;
  RunningSums sums;
  RunCheckpoints checkpoints;
  RunProgress progress;
  RunTimes times;
  std::unique_ptr<GraphedStep> graphed;  // --cuda-graphs where the step can be captured
  std::optional<RunLock> lock;  // held from the run's start (rank 0 of a run that writes)
  int stopping_for = 0;         // the signal the run stops for, once agreed (train/stop_signals.h)

  // The set-up, in the order bit-identical runs depend on (Note [A training step]).
  State(RunContext run_in, TrainData data_in, std::shared_ptr<nn::Layer> model_in, TrainerOutput output);

  // The rooms a checkpoint holds.
  RunState state() { return {*model, *optimization, sums, logs}; }
  // What the forward pass goes through: DDP in a --ddp run, else the model.
  nn::Layer& forward_module() { return ddp ? static_cast<nn::Layer&>(*ddp) : *model; }
  // The bottleneck report of `records` (train/bottleneck.h) with the run's context.
  BottleneckReport report(const std::vector<TimeRangeRecord>& records, double wall, int64_t steps,
                          const HostSyncs& syncs) const;
};

}  // namespace kiln::train
