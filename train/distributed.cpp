// join_distributed, run_device and the agreement of ranks (train/distributed.h).
#include "train/distributed.h"

#include "core/backend.h"
#include "core/error.h"
#include "core/ops.h"
#include "dist/ddp.h"
#include "dist/init_process_group.h"
#include "dist/process_group.h"
#include "dist/process_group_nccl.h"
#include "nn/module.h"
#include "train/run_context.h"

namespace kiln::train {
namespace {

bool wants_gpu(const std::string& device) {
  return device == "cuda" || (device == "auto" && cuda_is_available());
}

// The backend's name for init_process_group; auto: NCCL for a GPU run when NCCL is there.
std::string backend_name(DistBackend backend, const TrainConfig& config) {
  if (backend != DistBackend::Auto) return choice_name(backend);
  return wants_gpu(config.device) && dist::built_with_nccl() ? choice_name(DistBackend::Nccl)
                                                             : choice_name(DistBackend::Ring);
}

}  // namespace

DistributedRun join_distributed(const TrainConfig& config, DistBackend backend) {
  DistributedRun run;
  if (!config.ddp) return run;
  if (!dist::is_initialized()) dist::init_process_group({.backend = backend_name(backend, config)});
  run.enabled = true;
  run.rank = dist::get_rank();
  run.world_size = dist::get_world_size();
  run.local_rank = dist::rendezvous_info().local_rank;
  run.group = dist::world_group();
  return run;
}

void share_rank0_buffers(const DistributedRun& run, nn::Module& model) {
  if (!run.enabled) return;
  const std::vector<Tensor> buffers = model.buffers();
  if (!buffers.empty()) dist::broadcast_coalesced(*run.group, buffers, 0);
}

std::vector<double> rank0_values(const DistributedRun& run, const std::vector<double>& values, Device device) {
  if (!run.enabled) return values;
  const Tensor shared = tensor(values).to(device);
  run.group->broadcast(shared, 0)->wait();
  return shared.to_vector<double>();
}

std::vector<int64_t> max_over_ranks(const DistributedRun& run, const std::vector<int64_t>& values, Device device) {
  if (!run.enabled) return values;
  const Tensor shared = tensor(values).to(device);
  run.group->all_reduce(shared, dist::ReduceOp::Max)->wait();
  return shared.to_vector<int64_t>();
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
