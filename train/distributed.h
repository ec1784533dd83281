// A training run across processes (`kiln launch ... kiln train --ddp`): the process group
// joined from the launcher's environment (torchrun's, SLURM's or Open MPI's variables,
// dist/rendezvous.h), each rank's device, and what the Trainer changes for it:
//   - batch norm synchronised across ranks with --sync-bn (dist/sync_batch_norm.h);
//   - the model wrapped in DistributedDataParallel after the optimizer and mixed precision
//     are set up, so gradients arrive averaged; accumulation skips the all-reduce of the
//     micro-batches between steps (no_sync);
//   - the training set shuffled once per epoch and dealt out by DistributedSampler, so the
//     ranks' batches together are a one-process run's batch of world x batch-size samples
//     (rank r takes positions r, r + W, ... of the same permutation);
//   - every rank evaluates the whole validation and test splits with rank 0's batch-norm
//     buffers, and the decisions (best epoch, plateau, early stopping) use rank 0's numbers
//     (Note [Ranks agree] in train/trainer.cpp); rank 0 alone prints and writes the run
//     folder.
//
//   const train::DistributedRun dist = train::join_distributed(config);  // before the Trainer
#pragma once

#include <cstdint>
#include <memory>

#include "core/device.h"
#include "train/config.h"

namespace kiln::dist {
class ProcessGroup;
}

namespace kiln::train {

struct DistributedRun {
  bool enabled = false;  // --ddp
  int64_t rank = 0, world_size = 1, local_rank = 0;
  std::shared_ptr<dist::ProcessGroup> group;  // null unless enabled
  bool writes() const { return rank == 0; }
};

// With config.ddp: the default process group (initialised here from the environment when
// no one has; backend "auto": NCCL for a GPU run when NCCL is there, else Kiln's ring).
// Without it: a run of one.
DistributedRun join_distributed(const TrainConfig& config);

// The run's device: resolve_device(config.device), except that a distributed GPU run
// takes the GPU of its local rank ("auto" or "cuda").
Device run_device(const TrainConfig& config, const DistributedRun& run);

}  // namespace kiln::train
