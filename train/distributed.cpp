// join_distributed and run_device (train/distributed.h).
#include "train/distributed.h"

#include "core/backend.h"
#include "core/error.h"
#include "dist/init_process_group.h"
#include "dist/process_group.h"
#include "dist/process_group_nccl.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

bool wants_gpu(const std::string& device) {
  return device == "cuda" || (device == "auto" && cuda_is_available());
}

}  // namespace

DistributedRun join_distributed(const TrainConfig& config) {
  DistributedRun run;
  if (!config.ddp) return run;
  if (!dist::is_initialized()) {
    std::string backend = config.dist_backend;
    if (backend == "auto") backend = wants_gpu(config.device) && dist::built_with_nccl() ? "nccl" : "ring";
    dist::init_process_group({.backend = backend});
  }
  run.enabled = true;
  run.rank = dist::get_rank();
  run.world_size = dist::get_world_size();
  run.local_rank = dist::rendezvous_info().local_rank;
  run.group = dist::world_group();
  return run;
}

Device run_device(const TrainConfig& config, const DistributedRun& run) {
  if (run.enabled && wants_gpu(config.device)) {
    KILN_CHECK(cuda_is_available(), "device ", config.device,
               ": CUDA is not available: ", cuda_unavailable_reason());
    const int gpus = cuda_device_count();
    KILN_CHECK(run.local_rank < gpus, "--ddp: local rank ", run.local_rank, " has no GPU of its own (", gpus,
               " GPUs here); start at most ", gpus, " processes per node");
    return Device::cuda(static_cast<int>(run.local_rank));
  }
  return resolve_device(config.device);
}

}  // namespace kiln::train
