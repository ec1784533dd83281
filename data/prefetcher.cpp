// DevicePrefetcher (prefetcher.h): Note [Prefetching to the device].
#include "data/prefetcher.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace kiln::data {

DevicePrefetcher::DevicePrefetcher(DataLoader& loader, Device device) : loader_(loader), device_(device) {
  if (!device.is_cpu()) copy_stream_ = Stream::create(device);
}

DevicePrefetcher::Epoch DevicePrefetcher::epoch(int64_t epoch) {
  timings_.clear();
  return Epoch(this, loader_.epoch(epoch));
}

LoaderStats DevicePrefetcher::stats() const {
  LoaderStats stats = loader_.stats();
  for (const CopyTiming& timing : timings_) {
    if (!timing.consumer_ready.recorded()) continue;  // not handed over (yet)
    timing.end.synchronize();
    timing.consumer_ready.synchronize();
    stats.copy_seconds += timing.end.elapsed_ms_since(timing.start) / 1e3;
    // Note [Copy waits]: positive when the copy ended after the consumer got there.
    stats.copy_wait_seconds += std::max(0.0, timing.end.elapsed_ms_since(timing.consumer_ready) / 1e3);
  }
  return stats;
}

DevicePrefetcher::Epoch::Epoch(DevicePrefetcher* prefetcher, DataLoader::Epoch loader_epoch)
    : prefetcher_(prefetcher), loader_epoch_(std::move(loader_epoch)) {}

void DevicePrefetcher::Epoch::start_copy(Batch batch) {
  const Stream& copies = *prefetcher_->copy_stream_;
  CopyTiming& timing = prefetcher_->timings_.emplace_back();
  {
    StreamGuard on_copies(copies);
    timing.start.record(copies);
    for (auto& [name, tensor] : batch.tensors)
      tensor = tensor.to(prefetcher_->device_, /*non_blocking=*/true);
    timing.end.record(copies);
    ahead_ready_.record(copies);
  }
  ahead_ = std::move(batch);
}

std::optional<Batch> DevicePrefetcher::Epoch::next() {
  if (!prefetcher_->copy_stream_) return loader_epoch_.next();  // the CPU: a pass-through
  if (following_error_) std::rethrow_exception(std::exchange(following_error_, nullptr));
  if (!started_) {
    started_ = true;
    if (std::optional<Batch> first = loader_epoch_.next()) start_copy(std::move(*first));
  }
  if (!ahead_) return std::nullopt;
  Batch current = std::move(*ahead_);
  ahead_.reset();
  const Stream consumer = Stream::current(prefetcher_->device_);
  prefetcher_->timings_[handed_over_++].consumer_ready.record(consumer);
  consumer.wait(ahead_ready_);
  for (const auto& [name, tensor] : current.tensors) record_stream(tensor, consumer);
  // Batch i+1's copies are queued before batch i is handed over (the consumer's kernels
  // for batch i are queued after this returns, so the two overlap on the device). An
  // error loading batch i+1 is the consumer's when it asks for batch i+1, as with the
  // loader itself; batch i is still handed over.
  try {
    if (std::optional<Batch> following = loader_epoch_.next()) start_copy(std::move(*following));
  } catch (...) {
    following_error_ = std::current_exception();
  }
  return current;
}

}  // namespace kiln::data
