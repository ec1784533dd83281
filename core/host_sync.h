// Host syncs: the places where the host stops until a device has finished, counted, so a
// training loop can show it makes none between log intervals (the speed-up guides' "avoid
// .item() and .cpu() in the loop") and the trainer's report can name them.
//
//   Item          Tensor::item() and to_vector(): a number for the host. Counted on the CPU
//                 too, where it costs nothing, because the same line stalls a GPU.
//   CopyToHost    a blocking copy from a device to the CPU
//   Synchronize   a device, stream or event synchronize
//   IndexCheck    a GPU index op reading back its out-of-bounds flag
//
// Counters are per thread (a thread-local increment per event), and host_syncs() reads the
// calling thread's: what stalls a GPU is its training thread waiting, while a loader
// worker's item() on its own CPU tensors (a random draw in an augmentation) waits for
// nothing.
//
//   const HostSyncs before = host_syncs();
//   train_step();
//   const int64_t syncs = (host_syncs() - before).total();
//
// Note [No host syncs in a capture]: while the calling thread captures a CUDA graph
// (CaptureOnThisThread, held by the graph's capture), a host sync on a GPU is a kiln::Error
// naming it. The work a capture records does not run until the graph is replayed, so the
// host would wait for nothing and read values that do not exist yet; CUDA itself would
// fail the capture with an error about the stream, or worse, for a blocking copy from
// pageable memory, record whatever the host buffer held at capture time.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace kiln {

enum class HostSync : uint8_t { Item, CopyToHost, Synchronize, IndexCheck, kCount };

struct HostSyncs {
  int64_t item = 0, copy_to_host = 0, synchronize = 0, index_check = 0;
  int64_t total() const { return item + copy_to_host + synchronize + index_check; }
  HostSyncs& operator+=(const HostSyncs& more) {
    item += more.item;
    copy_to_host += more.copy_to_host;
    synchronize += more.synchronize;
    index_check += more.index_check;
    return *this;
  }
  HostSyncs operator-(const HostSyncs& earlier) const {
    return {item - earlier.item, copy_to_host - earlier.copy_to_host, synchronize - earlier.synchronize,
            index_check - earlier.index_check};
  }
};

// Counts a host sync of `kind` on `device` (the CPU counts too: the same line would stall a
// GPU); during a capture on this thread, one on a GPU throws (Note [No host syncs in a capture]).
void note_host_sync(HostSync kind, Device device);
HostSyncs host_syncs();

// Marks the calling thread as capturing a CUDA graph for its lifetime (not nestable).
class CaptureOnThisThread {
 public:
  CaptureOnThisThread();
  ~CaptureOnThisThread();
  CaptureOnThisThread(const CaptureOnThisThread&) = delete;
  CaptureOnThisThread& operator=(const CaptureOnThisThread&) = delete;
};
bool capturing_on_this_thread();

}  // namespace kiln
