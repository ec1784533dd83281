// DataLoader: batches of a Dataset, loaded ahead on worker threads, in sampler order
// whatever the worker count, with PyTorch's option names and defaults.
//
//   data::DataLoader loader(dataset, {.batch_size = 8, .shuffle = true, .num_workers = 2,
//                                     .pin_memory = true, .transform = augment, .seed = 1});
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     for (data::Batch& batch : loader.epoch(epoch)) train_step(batch.at("image"), ...);
//   }
//
// Note [Loader order and errors]: an epoch is a list of batches (the sampler's indices cut
// into batch_size pieces). Workers take batches in that order from a shared counter, at
// most num_workers x prefetch_factor ahead of the consumer (so a slow or stopped consumer
// holds the workers, never lets memory grow), and leave each finished batch in its slot;
// the consumer takes slot 0, 1, 2, ... So the batches, and every sample's augmentation
// (sample_generator(seed, epoch, index), Note [Per-sample randomness]), are the same for 0,
// 1 or 8 workers. An exception in a worker (the dataset, a transform, the collate) is kept
// in its batch's slot and thrown in the consumer when it reaches that batch, as a
// kiln::Error naming the sample index and the original message; later batches are not
// waited for. With `timeout` > 0 the consumer's wait for one batch is bounded and a stuck
// batch becomes an error. Leaving an epoch early (break, an exception, destroying the
// loader) stops the workers after the samples they are loading and joins them; no thread
// outlives its epoch unless persistent_workers keeps them for the next. Each worker runs
// the CPU kernels single-threaded (as PyTorch's workers run torch.set_num_threads(1)).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/next_iterator.h"
#include "data/sampler.h"
#include "data/transforms.h"

namespace kiln::data {

// A collated batch: each tensor name's samples stacked along a new dim 0, the samples'
// metadata in order, and their dataset indices.
struct Batch {
  std::map<std::string, Tensor> tensors;
  std::vector<std::map<std::string, std::string>> metadata;
  std::vector<int64_t> indices;
  const Tensor& at(const std::string& name) const;
};

// Stacks every tensor name (the samples must have the same names, and each name the same
// shape and dtype: an error names the first mismatch); into pinned host memory when
// `pin_memory` and a GPU is there (the copy to the GPU can then be asynchronous).
Batch default_collate(std::vector<Sample> samples, const std::vector<int64_t>& indices,
                      bool pin_memory = false);

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;                     // RandomSampler(seed) when no sampler is given
  SamplerPtr sampler = nullptr;             // else SequentialSampler
  BatchSamplerPtr batch_sampler = nullptr;  // makes the batches itself (then none of the four above)
  bool drop_last = false;
  int64_t num_workers = 0;      // threads; 0 loads in the consumer's thread
  int64_t prefetch_factor = 2;  // batches each worker may be ahead
  bool persistent_workers = false;
  bool pin_memory = false;
  TransformPtr transform = nullptr;  // applied to each sample on the workers
  uint64_t seed = 0;                 // the shuffle and the per-sample generators
  double timeout = 0;                // seconds a batch may take; 0: no limit
  std::function<void(int64_t worker)> worker_init_fn = nullptr;
  std::function<Batch(std::vector<Sample>, const std::vector<int64_t>&)> collate = nullptr;
};

// Note [Loader statistics]: where an epoch's time went, for the trainer's report. The
// consumer's wait is what data loading cost the training loop: host seconds spent in
// next() for a batch not yet ready (0 when the workers keep ahead). Load and collate
// times are the workers' CPU seconds, summed over workers, so with 4 workers they may
// add up to 4x the epoch: against the wait they say whether more workers would help. The
// copy time is the device's time for the host-to-device copies of a DevicePrefetcher
// (data/prefetcher.h), measured with timing events on its copy stream; since the copies
// overlap compute, it matters only if it approaches the step time; the time the
// consumer's stream actually waited for copies is copy_wait_seconds (Note [Copy waits]).
// The loader alone leaves both 0.
struct LoaderStats {
  int64_t batches = 0;
  double wait_seconds = 0;       // the consumer waiting for a batch not yet ready
  double load_seconds = 0;       // summed over workers: dataset get + transform
  double collate_seconds = 0;    // summed over workers
  double copy_seconds = 0;       // host-to-device copies (DevicePrefetcher)
  double copy_wait_seconds = 0;  // the consumer's device stream waiting for them
};

class DataLoader {
 public:
  class Epoch;
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch.
  int64_t size() const;
  // The batches of epoch `epoch` (one Epoch at a time per loader), from batch
  // `first_batch` on: a run resumed from a checkpoint taken mid-epoch skips the batches it
  // trained on without loading them (the order is the same: Note [Loader order and errors]).
  Epoch epoch(int64_t epoch, int64_t first_batch = 0);
  const DataLoaderOptions& options() const { return options_; }
  // What the last (or current) epoch measured.
  LoaderStats stats() const;

  class Epoch {
   public:
    using Iterator = NextIterator<Epoch>;
    Epoch(Epoch&&) noexcept;
    Epoch& operator=(Epoch&&) = delete;
    ~Epoch();
    // The next batch in order, or nullopt at the end of the epoch.
    std::optional<Batch> next();
    Iterator begin() { return Iterator(this); }
    std::default_sentinel_t end() { return {}; }

   private:
    friend class DataLoader;
    explicit Epoch(DataLoader* loader);
    DataLoader* loader_;
  };

 private:
  struct Slot;
  struct State;
  Batch load_batch(int64_t batch, const std::vector<int64_t>& indices, int64_t epoch) const;
  void start_epoch(int64_t epoch, int64_t first_batch);
  std::optional<Batch> next_batch();
  void stop_epoch();
  void worker_loop(int64_t worker);

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  BatchSamplerPtr batches_;  // the batch_sampler, or the sampler cut into batch_size pieces
  std::unique_ptr<State> state_;
  std::vector<std::thread> workers_;
};

}  // namespace kiln::data
