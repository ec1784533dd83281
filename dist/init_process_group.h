// The process-wide default group, as torch.distributed's module functions:
//
//   init_process_group(options)   rendezvous (rendezvous.h), the store (rank 0 serves it),
//                                 and the default group of every rank
//   default_group(), get_rank(), get_world_size(), is_initialized(), rendezvous_info()
//   new_group(ranks)              a group of some ranks: every rank of the world calls it,
//                                 with the same ranks, in the same order; ranks outside it
//                                 get nullptr
//   destroy_process_group()       finishes issued collectives and closes every group
//
// Backends: "ring" (ours, CPU and GPU tensors) and "nccl" (GPU tensors; see
// process_group_nccl.h where the build has NCCL). Every store call and collective has
// `timeout`.
//
//   const RendezvousInfo where = init_process_group({.backend = "ring"});
//   default_group().all_reduce(t)->wait();
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/rendezvous.h"
#include "dist/tcp_store.h"

namespace kiln::dist {

struct InitOptions {
  std::string backend = "ring";
  RendezvousOptions rendezvous = {};
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // nccl: this rank's GPU; -1: local rank modulo the GPUs visible.
  int device_index = -1;
};

RendezvousInfo init_process_group(const InitOptions& options = {});
void destroy_process_group();
bool is_initialized();
ProcessGroup& default_group();
// The default group as a shared pointer (what DDP and SyncBatchNorm hold by default).
std::shared_ptr<ProcessGroup> world_group();
const RendezvousInfo& rendezvous_info();
int64_t get_rank();
int64_t get_world_size();
// The store of the default group (for rendezvous of one's own).
TCPStore& default_store();
std::shared_ptr<ProcessGroup> new_group(const std::vector<int64_t>& ranks);

// A group of `backend` over `store` (the factory init_process_group and new_group use).
std::shared_ptr<ProcessGroup> make_process_group(const std::string& backend, std::shared_ptr<TCPStore> store,
                                                 int64_t rank, int64_t size, ProcessGroupOptions options,
                                                 const std::string& prefix, int device_index);

}  // namespace kiln::dist
