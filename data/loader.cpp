// The DataLoader (data/loader.h): an epoch's batches as index lists; worker threads take
// them in order under one mutex, at most num_workers x prefetch_factor ahead of the
// consumer, and leave each result (or its error) in its slot; the consumer takes the
// slots in order (Note [Loader order and errors]). Collation copies each sample once into
// the batch's tensors, pinned when asked and possible.
#include "data/loader.h"

#include <chrono>

#include "core/backend.h"  // cuda_is_available
#include "core/error.h"
#include "core/ops.h"
#include "core/time_range.h"

namespace kiln::data {

const Tensor& Batch::at(const std::string& name) const { return tensor_named(tensors, name, "batch"); }

Batch default_collate(std::vector<Sample> samples, const std::vector<int64_t>& indices, bool pin_memory) {
  KILN_CHECK(!samples.empty(), "collate: no samples");
  Batch batch;
  batch.indices = indices;
  const bool pin = pin_memory && cuda_is_available();
  const Sample& first = samples.front();
  for (size_t s = 1; s < samples.size(); ++s) {
    KILN_CHECK(samples[s].tensors.size() == first.tensors.size(), "collate: sample ", indices[s], " has ",
               samples[s].tensors.size(), " tensors, sample ", indices[0], " has ", first.tensors.size());
  }
  for (const auto& [name, model] : first.tensors) {
    std::vector<int64_t> shape = model.sizes();
    shape.insert(shape.begin(), static_cast<int64_t>(samples.size()));
    Tensor stacked = empty(shape, {.dtype = model.dtype(), .pin_memory = pin});
    for (size_t s = 0; s < samples.size(); ++s) {
      const auto it = samples[s].tensors.find(name);
      KILN_CHECK(it != samples[s].tensors.end(), "collate: sample ", indices[s], " has no tensor '", name,
                 "'");
      KILN_CHECK(it->second.sizes() == model.sizes() && it->second.dtype() == model.dtype(), "collate: '",
                 name, "' of sample ", indices[s], " is ", it->second.dtype(), " ", it->second.sizes(),
                 ", of sample ", indices[0], " ", model.dtype(), " ", model.sizes(),
                 " (a batch stacks equal shapes)");
      stacked.select(0, static_cast<int64_t>(s)).copy_(it->second);
    }
    batch.tensors.emplace(name, std::move(stacked));
  }
  for (Sample& sample : samples) batch.metadata.push_back(std::move(sample.metadata));
  return batch;
}

// ---- shared state -----------------------------------------------------------------------

struct DataLoader::Slot {
  std::optional<Batch> batch;
  std::string error;
};

struct DataLoader::State {
  std::mutex mutex;
  std::condition_variable work_ready;   // workers: an epoch started, room opened, or shutdown
  std::condition_variable batch_ready;  // the consumer: a slot was filled
  bool active = false;
  bool shutdown = false;
  uint64_t generation = 0;  // one per epoch, so late results of an earlier one are dropped
  int64_t epoch = 0;
  std::vector<std::vector<int64_t>> batches;
  int64_t next_to_take = 0;
  int64_t next_to_yield = 0;
  std::map<int64_t, Slot> slots;
  int64_t initialized = 0;        // workers past worker_init_fn (batches wait for all of them)
  std::string worker_init_error;  // the first worker_init_fn that threw
  LoaderStats stats;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)), state_(std::make_unique<State>()) {
  KILN_CHECK(dataset_ != nullptr, "DataLoader: no dataset");
  KILN_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ", options_.batch_size);
  KILN_CHECK(options_.num_workers >= 0, "DataLoader: num_workers must be >= 0, got ", options_.num_workers);
  KILN_CHECK(options_.prefetch_factor >= 1, "DataLoader: prefetch_factor must be >= 1, got ",
             options_.prefetch_factor);
  KILN_CHECK(options_.timeout >= 0, "DataLoader: timeout must be >= 0, got ", options_.timeout);
  KILN_CHECK(!(options_.shuffle && options_.sampler),
             "DataLoader: give a sampler or shuffle, not both (as PyTorch)");
  KILN_CHECK(
      !options_.batch_sampler ||
          (options_.batch_size == 1 && !options_.shuffle && !options_.sampler && !options_.drop_last),
      "DataLoader: a batch_sampler makes the batches: give no batch_size, shuffle, sampler or drop_last "
      "with it (as PyTorch)");
  if (options_.batch_sampler) {
    batches_ = options_.batch_sampler;
    return;
  }
  const SamplerPtr sampler = options_.sampler ? options_.sampler
                             : options_.shuffle
                                 ? std::make_shared<RandomSampler>(dataset_->size(), options_.seed)
                                 : SamplerPtr(std::make_shared<SequentialSampler>(dataset_->size()));
  batches_ = std::make_shared<SamplerBatches>(sampler, options_.batch_size, options_.drop_last);
}

DataLoader::~DataLoader() {
  stop_epoch();
  {
    const std::lock_guard lock(state_->mutex);
    state_->shutdown = true;
  }
  state_->work_ready.notify_all();
  for (std::thread& t : workers_) t.join();
}

int64_t DataLoader::size() const { return batches_->size(); }

LoaderStats DataLoader::stats() const {
  const std::lock_guard lock(state_->mutex);
  return state_->stats;
}

Batch DataLoader::load_batch(int64_t batch, const std::vector<int64_t>& indices, int64_t epoch) const {
  const Stopwatch loading;
  std::vector<Sample> samples;
  for (int64_t index : indices) {
    try {
      Sample sample = dataset_->get(index);
      if (options_.transform) {
        Generator generator = sample_generator(options_.seed, epoch, index);
        options_.transform->apply(sample, generator);
      }
      samples.push_back(std::move(sample));
    } catch (const std::exception& e) {
      KILN_CHECK(false, "DataLoader: sample ", index, " (batch ", batch, ") of ", dataset_->name(), ": ",
                 e.what());
    }
  }
  const double load_seconds = loading.seconds();
  const Stopwatch collating;
  Batch out;
  try {
    out = options_.collate ? options_.collate(std::move(samples), indices)
                           : default_collate(std::move(samples), indices, options_.pin_memory);
  } catch (const std::exception& e) {
    KILN_CHECK(false, "DataLoader: batch ", batch, " of ", dataset_->name(), ": ", e.what());
  }
  const std::lock_guard lock(state_->mutex);
  state_->stats.load_seconds += load_seconds;
  state_->stats.collate_seconds += collating.seconds();
  return out;
}

void DataLoader::worker_loop(int64_t worker) {
  // One CPU thread per worker (Backend::set_threads_of_this_thread): the workers are the
  // parallelism; OpenMP teams inside each would compete with them for the cores.
  backend(Device::cpu()).set_threads_of_this_thread(1);
  std::string init_error;
  if (options_.worker_init_fn) {
    try {
      options_.worker_init_fn(worker);
    } catch (const std::exception& e) {
      init_error =
          std::string("DataLoader: worker_init_fn(").append(std::to_string(worker)).append("): ") + e.what();
    }
  }
  {
    const std::lock_guard lock(state_->mutex);
    ++state_->initialized;
    if (!init_error.empty() && state_->worker_init_error.empty()) state_->worker_init_error = init_error;
  }
  state_->batch_ready.notify_all();
  if (!init_error.empty()) return;
  const int64_t ahead = options_.num_workers * options_.prefetch_factor;
  std::unique_lock lock(state_->mutex);
  while (true) {
    state_->work_ready.wait(lock, [&] {
      return state_->shutdown ||
             (state_->active && state_->next_to_take < static_cast<int64_t>(state_->batches.size()) &&
              state_->next_to_take < state_->next_to_yield + ahead);
    });
    if (state_->shutdown) return;
    const int64_t batch = state_->next_to_take++;
    const uint64_t generation = state_->generation;
    const std::vector<int64_t> indices = state_->batches[static_cast<size_t>(batch)];
    const int64_t epoch = state_->epoch;
    lock.unlock();
    Slot slot;
    try {
      slot.batch = load_batch(batch, indices, epoch);
    } catch (const std::exception& e) {
      slot.error = e.what();
    }
    lock.lock();
    if (state_->generation == generation && state_->active) {
      state_->slots[batch] = std::move(slot);
      state_->batch_ready.notify_all();
    }
  }
}

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  std::vector<std::vector<int64_t>> batches = batches_->batches(epoch);
  KILN_CHECK(first_batch >= 0 && first_batch <= static_cast<int64_t>(batches.size()), "DataLoader: epoch ", epoch,
             " has ", batches.size(), " batches; cannot start at batch ", first_batch);
  batches.erase(batches.begin(), batches.begin() + first_batch);
  for (const std::vector<int64_t>& batch : batches) {
    KILN_CHECK(!batch.empty(), "DataLoader: the batch sampler gave an empty batch");
  }
  {
    const std::lock_guard lock(state_->mutex);
    KILN_CHECK(!state_->active,
               "DataLoader: an epoch is already in progress (finish or drop its Epoch first)");
    state_->active = true;
    ++state_->generation;
    state_->epoch = epoch;
    state_->batches = std::move(batches);
    state_->next_to_take = 0;
    state_->next_to_yield = 0;
    state_->slots.clear();
    state_->stats = {};
  }
  if (options_.num_workers > 0 && workers_.empty()) {
    for (int64_t w = 0; w < options_.num_workers; ++w)
      workers_.emplace_back(&DataLoader::worker_loop, this, w);
  }
  state_->work_ready.notify_all();
}

std::optional<Batch> DataLoader::next_batch() {
  if (options_.num_workers == 0) {
    int64_t batch = 0, epoch = 0;
    std::vector<int64_t> indices;
    {
      const std::lock_guard lock(state_->mutex);
      if (state_->next_to_yield >= static_cast<int64_t>(state_->batches.size())) return std::nullopt;
      batch = state_->next_to_yield++;
      indices = state_->batches[static_cast<size_t>(batch)];
      epoch = state_->epoch;
    }
    Batch out = load_batch(batch, indices, epoch);
    const std::lock_guard lock(state_->mutex);
    ++state_->stats.batches;
    return out;
  }
  std::unique_lock lock(state_->mutex);
  if (state_->next_to_yield >= static_cast<int64_t>(state_->batches.size())) return std::nullopt;
  const int64_t batch = state_->next_to_yield;
  // Every worker's worker_init_fn first, so that one that throws is always reported.
  const auto ready = [&] {
    return state_->initialized == options_.num_workers &&
           (state_->slots.count(batch) > 0 || !state_->worker_init_error.empty());
  };
  const Stopwatch waiting;
  if (options_.timeout > 0) {
    const bool arrived =
        state_->batch_ready.wait_for(lock, std::chrono::duration<double>(options_.timeout), ready);
    KILN_CHECK(arrived, "DataLoader: batch ", batch, " of ", dataset_->name(), " was not ready after ",
               options_.timeout, " s (timeout): a sample is stuck or too slow");
  } else {
    state_->batch_ready.wait(lock, ready);
  }
  state_->stats.wait_seconds += waiting.seconds();
  KILN_CHECK(state_->worker_init_error.empty(), state_->worker_init_error);
  Slot slot = std::move(state_->slots[batch]);
  state_->slots.erase(batch);
  ++state_->next_to_yield;
  ++state_->stats.batches;
  lock.unlock();
  state_->work_ready.notify_all();  // room for one more ahead
  KILN_CHECK(slot.error.empty(), slot.error);
  return std::move(slot.batch);
}

void DataLoader::stop_epoch() {
  {
    const std::lock_guard lock(state_->mutex);
    if (!state_->active) return;
    state_->active = false;
    ++state_->generation;
    state_->slots.clear();
    if (!options_.persistent_workers) state_->shutdown = true;
  }
  state_->work_ready.notify_all();
  if (!options_.persistent_workers) {
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    const std::lock_guard lock(state_->mutex);
    state_->shutdown = false;
    state_->initialized = 0;
    state_->worker_init_error.clear();
  }
}

// ---- epochs ------------------------------------------------------------------------------

DataLoader::Epoch DataLoader::epoch(int64_t epoch, int64_t first_batch) {
  start_epoch(epoch, first_batch);
  return Epoch(this);
}

DataLoader::Epoch::Epoch(DataLoader* loader) : loader_(loader) {}

DataLoader::Epoch::Epoch(Epoch&& other) noexcept : loader_(other.loader_) { other.loader_ = nullptr; }

DataLoader::Epoch::~Epoch() {
  if (loader_ != nullptr) loader_->stop_epoch();
}

std::optional<Batch> DataLoader::Epoch::next() {
  KILN_CHECK(loader_ != nullptr, "DataLoader: this Epoch was moved from");
  return loader_->next_batch();
}

}  // namespace kiln::data
