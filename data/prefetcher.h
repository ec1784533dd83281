// DevicePrefetcher: a DataLoader's batches on a device, each copied while the one before
// it is in use. The "background prefetch / non_blocking=True" pattern of the speed-up
// guides, done so that it is correct:
//
//   data::DataLoader loader(dataset, {.batch_size = 64, .num_workers = 2, .pin_memory = true});
//   data::DevicePrefetcher prefetcher(loader, Device::cuda());
//   for (data::Batch& batch : prefetcher.epoch(epoch)) train_step(batch.at("image"), ...);
//
// Note [Prefetching to the device]: when batch i is handed over, batch i+1's copies are
// already queued on the prefetcher's own copy stream (asynchronous when the loader pins
// its batches). Handing batch i over does two things on the consumer's current stream,
// neither of which blocks the host:
//   - it waits for an event recorded after batch i's copies, so the kernels the consumer
//     queues next start only once the data is there;
//   - it records the batch's tensors on that stream (record_stream): they were allocated
//     on the copy stream, and without it the caching allocator could give their memory
//     to the copy of batch i+2 while the consumer's kernels still read it.
// The pinned host batch stays alive until its copy has completed: the pinned allocator
// holds a block read by an asynchronous copy until the copy's event.
// On the CPU (device cpu) the prefetcher passes the loader's batches through.
//
// PrefetchMode::None (the trainer's --device-prefetch=false, the guides' baseline) copies
// each batch when it is taken instead, on the consumer's stream (asynchronously when the
// loader pinned it), so no copy overlaps the previous step.
//
// Note [Batch ranges]: an epoch's next() is the training loop's "data" phase: it runs in a
// TimeRange named kDataRange (core/time_range.h); the copies of PrefetchMode::None run in
// one named kCopyRange, timed on the device. The trainer's bottleneck report reads its
// phases "data" and "copy" from these (train/bottleneck.h).
//
// Note [Copy waits]: whether the device ever waited for a copy is measured, not assumed.
// At each hand-over a timing event is recorded on the consumer's stream just before its
// wait; the copy's own end event is recorded on the copy stream. If the copy ended after
// the consumer's stream got there, the stream waited the difference: its sum over the
// epoch is LoaderStats::copy_wait_seconds, 0 when the copies always kept ahead.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "core/stream.h"
#include "data/loader.h"

namespace kiln::data {

// Note [Batch ranges].
inline constexpr const char* kDataRange = "data";
inline constexpr const char* kCopyRange = "copy";

enum class PrefetchMode : uint8_t {
  CopyStream,  // batch i+1 copied on the prefetcher's stream while batch i is used
  None,        // each batch copied on the consumer's stream when it is taken
};

class DevicePrefetcher {
 public:
  class Epoch;
  // `loader` must outlive the prefetcher.
  DevicePrefetcher(DataLoader& loader, Device device, PrefetchMode mode = PrefetchMode::CopyStream);

  // The batches of epoch `epoch` from batch `first_batch` on (DataLoader::epoch), on the
  // device (one Epoch at a time).
  Epoch epoch(int64_t epoch, int64_t first_batch = 0);
  Device device() const { return device_; }
  // The loader's batches per epoch.
  int64_t size() const { return loader_.size(); }
  // The loader's statistics of the last (or current) epoch, with the device time of its
  // copies and of the consumer's waits for them (Note [Loader statistics], Note [Copy
  // waits]; over the batches handed over so far, waiting for their events).
  LoaderStats stats() const;

 private:
  // The timing events of one batch: around its copies, and the consumer's stream
  // reaching its hand-over (Note [Copy waits]). The end event is also what the consumer
  // waits for.
  struct CopyTiming {
    Event start{/*enable_timing=*/true}, end{/*enable_timing=*/true};
    Event consumer_ready{/*enable_timing=*/true};
  };
  // A batch whose copies are queued: the tensors copied (only those are recorded on the
  // consumer's stream; one already on the device is left alone) and its timing.
  struct InFlight {
    Batch batch;
    std::vector<std::string> copied;
    CopyTiming timing;
  };
  // Adds a handed-over batch's timing; folds those whose events have completed into the
  // totals, so an epoch keeps a few events alive, not three per batch.
  void add_timing(CopyTiming timing);

 public:
  class Epoch {
   public:
    using Iterator = NextIterator<Epoch>;
    Epoch(Epoch&&) noexcept = default;
    Epoch& operator=(Epoch&&) = delete;
    // The next batch, on the device and ready for the consumer's current stream, or
    // nullopt at the end of the epoch. A batch the loader fails to load is an error at
    // its turn; the epoch goes on with the next batch when asked again, as the loader's.
    std::optional<Batch> next();
    Iterator begin() { return Iterator(this); }
    std::default_sentinel_t end() { return {}; }

   private:
    friend class DevicePrefetcher;
    Epoch(DevicePrefetcher* prefetcher, DataLoader::Epoch loader_epoch);
    // Takes the loader's next batch and queues its copies (ahead_), or marks the end.
    void fetch_next();
    // CopyStream: the batch copied ahead, ready for the consumer's stream, and the next
    // one's copies queued.
    std::optional<Batch> hand_over_ahead();
    // None: the batch copied now, on the consumer's stream.
    void copy_when_taken(Batch& batch);

    DevicePrefetcher* prefetcher_;
    DataLoader::Epoch loader_epoch_;
    bool exhausted_ = false;
    std::optional<InFlight> ahead_;
    std::exception_ptr following_error_;  // loading the batch after the one handed over
  };

 private:
  DataLoader& loader_;
  Device device_;
  PrefetchMode mode_;
  std::optional<Stream> copy_stream_;                // CopyStream on a device with queues
  std::deque<CopyTiming> pending_;                   // handed over, events not yet folded in
  double copy_seconds_ = 0, copy_wait_seconds_ = 0;  // folded in, this epoch
};

}  // namespace kiln::data
