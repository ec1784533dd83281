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
#pragma once

#include <cstdint>

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

void note_host_sync(HostSync kind);
HostSyncs host_syncs();

}  // namespace kiln
