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
//     (Note [Ranks agree] below); rank 0 alone prints and writes the run folder.
//
// Note [Ranks agree]: in a --ddp run every rank must take the same decisions (the best
// epoch, the plateau scheduler's step, early stopping), or one rank leaves the loop while
// the others wait in a collective. Parameters agree (DDP), but each rank's last forward
// updated its batch-norm running statistics on its own batch; so before validating, rank
// 0's buffers are copied to every rank (share_rank0_buffers: the model each rank
// evaluates, and keeps as the best, is then the same), and the validation numbers the
// decisions use are rank 0's (rank0_values).
//
//   const train::DistributedRun dist = train::join_distributed(config, choices.dist_backend);
// (resolve_run does this for the Trainer, train/run_context.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "train/config.h"

namespace kiln::dist {
class ProcessGroup;
}
namespace kiln::nn {
class Module;
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
DistributedRun join_distributed(const TrainConfig& config, DistBackend backend);

// Note [Ranks agree]: rank 0's buffers (batch-norm statistics) on every rank; nothing
// without --ddp.
void share_rank0_buffers(const DistributedRun& run, nn::Module& model);
// Note [Ranks agree]: rank 0's `values` on every rank (through `device`); `values` without --ddp.
std::vector<double> rank0_values(const DistributedRun& run, const std::vector<double>& values, Device device);

// Each of `values` as its largest over the ranks, on every rank (through `device`);
// `values` without --ddp.
std::vector<int64_t> max_over_ranks(const DistributedRun& run, const std::vector<int64_t>& values, Device device);

// The run's device: resolve_device(config.device) (train/run_context.h), except that a distributed GPU run
// takes the GPU of its local rank ("auto" or "cuda").
Device run_device(const TrainConfig& config, const DistributedRun& run);

}  // namespace kiln::train
