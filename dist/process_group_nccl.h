// The NCCL backend: collectives on GPU tensors through NVIDIA's NCCL, the engine for GPUs
// across processes and machines (NVLink, PCIe, InfiniBand, sockets). Built when the
// configure step finds nccl.h and libnccl (beside the CUDA toolkit or under NCCL_ROOT); the
// library itself is loaded on first use (dist/nccl/nccl_loader.cpp).
//
// - One communicator per process group, on one GPU; rank 0 makes NCCL's unique id and
//   hands it out through the store. The communicator is non-blocking, so set-up and every
//   collective can be abandoned (ncclCommAbort) when the timeout passes.
// - Collectives run on the group's own stream, after the work the caller's current stream
//   had queued (an event), so they overlap later computation; their tensors are recorded
//   on that stream for the caching allocator. Non-contiguous tensors go through a
//   contiguous copy.
// - A watchdog thread completes each Work when its end event has passed, polls
//   ncclCommGetAsyncError, and aborts the communicator (failing every pending Work with a
//   message naming the collective) on an NCCL error, on the timeout, or when another rank
//   publishes in the store that it aborted. A rank that dies silently is thus found by
//   NCCL's own error checks, through the store, or at the latest at the timeout.
//
//   auto group = make_nccl_process_group(store, rank, world_size, {}, "default/", local_rank);
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/tcp_store.h"

namespace kiln::dist {

// Whether this build has the NCCL backend.
bool built_with_nccl();

std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<TCPStore> store, int64_t rank,
                                                      int64_t size, ProcessGroupOptions options,
                                                      const std::string& prefix, int device_index);

}  // namespace kiln::dist
