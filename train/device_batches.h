// DeviceBatches: one loader's batches on the run's device, each fetch timed as the
// bottleneck report's "data" phase (and "copy", when the copies are the loop's own).
//
// With device prefetching (the default on a GPU) batches come through a
// data::DevicePrefetcher, whose copies run on a copy stream while the previous batch
// trains; without it (--no-device-prefetch, the guides' baseline) each batch is copied on
// the compute stream when it is taken, asynchronously from pinned memory. On the CPU the
// loader's batches pass through.
//
//   train::DeviceBatches batches(loader, device, /*prefetch=*/true);
//   batches.start(epoch);
//   while (std::optional<data::Batch> batch = batches.next()) step(*batch);
#pragma once

#include <cstdint>
#include <optional>

#include "data/loader.h"
#include "data/prefetcher.h"

namespace kiln::train {

class DeviceBatches {
 public:
  // `loader` must outlive this.
  DeviceBatches(data::DataLoader& loader, Device device, bool prefetch);

  // Starts epoch `epoch` at batch `first_batch` (a resumed mid-epoch checkpoint).
  void start(int64_t epoch, int64_t first_batch = 0);
  // The next batch on the device, or nullopt at the epoch's end (which ends it).
  std::optional<data::Batch> next();
  // The loader's (and prefetcher's) statistics of the current or last epoch.
  data::LoaderStats stats() const { return prefetcher_.stats(); }
  int64_t size() const { return loader_.size(); }

 private:
  data::DataLoader& loader_;
  data::DevicePrefetcher prefetcher_;
  Device device_;
  bool copy_here_;  // a GPU run without the prefetcher's copy stream
  std::optional<data::DevicePrefetcher::Epoch> epoch_;
};

}  // namespace kiln::train
