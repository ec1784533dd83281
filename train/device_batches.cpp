// DeviceBatches (train/device_batches.h): the prefetcher's epoch, or the loader's batches
// copied here, inside the report's phase ranges.
#include "train/device_batches.h"

#include "core/time_range.h"
#include "train/bottleneck.h"

namespace kiln::train {

DeviceBatches::DeviceBatches(data::DataLoader& loader, Device device, bool prefetch)
    : loader_(loader),
      prefetcher_(loader, prefetch ? device : Device::cpu()),
      device_(device),
      copy_here_(!prefetch && !device.is_cpu()) {}

void DeviceBatches::start(int64_t epoch, int64_t first_batch) {
  epoch_.reset();  // the previous epoch's, if it was left early
  epoch_.emplace(prefetcher_.epoch(epoch, first_batch));
}

std::optional<data::Batch> DeviceBatches::next() {
  std::optional<data::Batch> batch;
  {
    const TimeRange range(phase::kData);
    batch = epoch_->next();
  }
  if (!batch) {
    epoch_.reset();
    return batch;
  }
  if (copy_here_) {
    const TimeRange range(phase::kCopy, device_);
    for (auto& [name, tensor] : batch->tensors)
      tensor = tensor.to(device_, /*non_blocking=*/tensor.is_pinned());
  }
  return batch;
}

}  // namespace kiln::train
