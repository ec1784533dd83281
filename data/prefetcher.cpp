// DevicePrefetcher (prefetcher.h): Note [Prefetching to the device].
#include "data/prefetcher.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/time_range.h"

namespace kiln::data {

DevicePrefetcher::DevicePrefetcher(DataLoader& loader, Device device, PrefetchMode mode)
    : loader_(loader), device_(device), mode_(mode) {
  if (!device.is_cpu() && mode == PrefetchMode::CopyStream) copy_stream_ = Stream::create(device);
}

DevicePrefetcher::Epoch DevicePrefetcher::epoch(int64_t epoch, int64_t first_batch) {
  DataLoader::Epoch batches = loader_.epoch(epoch, first_batch);  // throws if an epoch is in progress
  pending_.clear();
  copy_seconds_ = copy_wait_seconds_ = 0;
  return Epoch(this, std::move(batches));
}

namespace {

// A handed-over batch's copy time and the consumer's wait for it (Note [Copy waits]).
std::pair<double, double> seconds_of(const Event& start, const Event& end, const Event& consumer_ready) {
  return {end.elapsed_ms_since(start) / 1e3, std::max(0.0, end.elapsed_ms_since(consumer_ready) / 1e3)};
}

}  // namespace

void DevicePrefetcher::add_timing(CopyTiming timing) {
  pending_.push_back(std::move(timing));
  while (!pending_.empty() && pending_.front().end.query() && pending_.front().consumer_ready.query()) {
    const CopyTiming& done = pending_.front();
    const auto [copy, wait] = seconds_of(done.start, done.end, done.consumer_ready);
    copy_seconds_ += copy;
    copy_wait_seconds_ += wait;
    pending_.pop_front();
  }
}

LoaderStats DevicePrefetcher::stats() const {
  LoaderStats stats = loader_.stats();
  stats.copy_seconds = copy_seconds_;
  stats.copy_wait_seconds = copy_wait_seconds_;
  for (const CopyTiming& timing : pending_) {
    timing.end.synchronize();
    timing.consumer_ready.synchronize();
    const auto [copy, wait] = seconds_of(timing.start, timing.end, timing.consumer_ready);
    stats.copy_seconds += copy;
    stats.copy_wait_seconds += wait;
  }
  return stats;
}

DevicePrefetcher::Epoch::Epoch(DevicePrefetcher* prefetcher, DataLoader::Epoch loader_epoch)
    : prefetcher_(prefetcher), loader_epoch_(std::move(loader_epoch)) {}

void DevicePrefetcher::Epoch::fetch_next() {
  std::optional<Batch> batch = loader_epoch_.next();
  if (!batch) {
    exhausted_ = true;
    return;
  }
  const Stream& copies = *prefetcher_->copy_stream_;
  InFlight flight{.batch = std::move(*batch), .copied = {}, .timing = {}};
  {
    StreamGuard on_copies(copies);
    flight.timing.start.record(copies);
    for (auto& [name, tensor] : flight.batch.tensors) {
      if (tensor.device() == prefetcher_->device_) continue;  // already there: not ours to record
      tensor = tensor.to(prefetcher_->device_, /*non_blocking=*/true);
      flight.copied.push_back(name);
    }
    flight.timing.end.record(copies);
  }
  ahead_ = std::move(flight);
}

// Note [Batch ranges]: the copies of PrefetchMode::None follow the data range, not inside it
// (the report counts a nested range as its enclosing phase).
std::optional<Batch> DevicePrefetcher::Epoch::next() {
  std::optional<Batch> batch;
  {
    const TimeRange range(kDataRange);
    batch = prefetcher_->copy_stream_ ? hand_over_ahead() : loader_epoch_.next();  // the CPU: a pass-through
  }
  if (batch && !prefetcher_->copy_stream_ && !prefetcher_->device_.is_cpu()) copy_when_taken(*batch);
  return batch;
}

void DevicePrefetcher::Epoch::copy_when_taken(Batch& batch) {
  const TimeRange range(kCopyRange, prefetcher_->device_);
  for (auto& [name, tensor] : batch.tensors) tensor = tensor.to(prefetcher_->device_, tensor.is_pinned());
}

std::optional<Batch> DevicePrefetcher::Epoch::hand_over_ahead() {
  if (following_error_) std::rethrow_exception(std::exchange(following_error_, nullptr));
  if (!ahead_ && !exhausted_) fetch_next();  // the first batch, or the one after an error
  if (!ahead_) return std::nullopt;
  InFlight current = std::move(*ahead_);
  ahead_.reset();
  const Stream consumer = Stream::current(prefetcher_->device_);
  current.timing.consumer_ready.record(consumer);
  consumer.wait(current.timing.end);
  for (const std::string& name : current.copied) record_stream(current.batch.tensors.at(name), consumer);
  prefetcher_->add_timing(std::move(current.timing));
  // Batch i+1's copies are queued before batch i is handed over (the consumer's kernels
  // for batch i are queued after this returns, so the two overlap on the device). An
  // error loading batch i+1 is the consumer's when it asks for batch i+1, as with the
  // loader itself; batch i is still handed over.
  try {
    fetch_next();
  } catch (...) {
    following_error_ = std::current_exception();
  }
  return std::move(current.batch);
}

}  // namespace kiln::data
