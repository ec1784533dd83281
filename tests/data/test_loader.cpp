// The samplers (data/sampler.h) and the DataLoader (data/loader.h): batch order and
// contents, bit-identical batches for 0, 1, 2 and 8 workers with shuffling, augmentation
// and samples that finish out of order (Note [Loader order and errors]); errors naming
// the sample, timeouts, leaving an epoch early, a slow consumer, persistent workers and
// worker_init_fn; collation errors. Every threaded test runs under a watchdog, so a hang
// fails instead of stalling CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "core/backend.h"  // cuda_is_available
#include "core/ops.h"
#include "data/loader.h"
#include "tests/data/numbers_dataset.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::Batch;
using data::DataLoader;
using data::Sample;
using std::chrono::seconds;
using testing::Numbers;
using testing::path_of;
using testing::with_watchdog;

// Adds a random value per sample from its generator, so augmentation shows in the batch.
class AddNoise final : public data::Transform {
 public:
  void apply(Sample& sample, Generator& generator) const override {
    sample.tensors["x"] = add(sample.tensors["x"], rand({2}, {}, &generator));
  }
  std::string name() const override { return "AddNoise"; }
};

std::vector<int64_t> labels_of(const Batch& batch) { return batch.at("label").to_vector<int64_t>(); }

// ---- samplers -----------------------------------------------------------------------------

TEST(Sampler, RandomOrdersArePermutationsFixedByEpoch) {
  const data::RandomSampler sampler(50, /*seed=*/3);
  std::vector<int64_t> sorted = sampler.indices(0);
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_EQ(sampler.indices(1), data::RandomSampler(50, 3).indices(1));
  EXPECT_NE(sampler.indices(0), sampler.indices(1));
  EXPECT_NE(sampler.indices(0), data::RandomSampler(50, 4).indices(0));
  const data::RandomSampler with_replacement(5, 1, /*replacement=*/true, 1000);
  const std::vector<int64_t> drawn = with_replacement.indices(0);
  EXPECT_EQ(drawn.size(), 1000u);
  EXPECT_EQ(std::set<int64_t>(drawn.begin(), drawn.end()).size(), 5u);
  EXPECT_KILN_ERROR(data::RandomSampler(5, 1, false, 7), "needs replacement = true");
}

TEST(Sampler, WeightedDrawsFollowTheWeights) {
  const data::WeightedRandomSampler sampler({1, 0, 3}, 20000, /*seed=*/2);
  std::map<int64_t, int64_t> counts;
  for (int64_t i : sampler.indices(0)) ++counts[i];
  EXPECT_EQ(counts[1], 0);  // a zero weight is never drawn
  EXPECT_NEAR(static_cast<double>(counts[2]) / 20000, 0.75, 0.015);
  const data::WeightedRandomSampler without({1, 1, 0, 5}, 3, 2, /*replacement=*/false);
  const std::vector<int64_t> once = without.indices(0);
  EXPECT_EQ(std::set<int64_t>(once.begin(), once.end()), (std::set<int64_t>{0, 1, 3}));
  EXPECT_KILN_ERROR(data::WeightedRandomSampler({0, 0}, 1), "every weight is 0");
  EXPECT_KILN_ERROR(data::WeightedRandomSampler({1, -1}, 1), "finite and >= 0");
  EXPECT_KILN_ERROR(data::WeightedRandomSampler({1, 1}, 3, 0, false), "3 samples without replacement from 2");
}

TEST(Sampler, DistributedRanksShareOneOrderEvenly) {
  for (bool drop_last : {false, true}) {
    std::vector<int64_t> all;
    for (int64_t rank = 0; rank < 3; ++rank) {
      const data::DistributedSampler sampler(10, 3, rank, /*shuffle=*/true, /*seed=*/9, drop_last);
      const std::vector<int64_t> mine = sampler.indices(4);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), drop_last ? 3 : 4);
      EXPECT_EQ(sampler.size(), drop_last ? 3 : 4);
      EXPECT_NE(mine, sampler.indices(5));  // set_epoch: another order
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::set<int64_t> distinct(all.begin(), all.end());
    EXPECT_EQ(distinct.size(), drop_last ? 9u : 10u);  // padded by repeating: every index covered
  }
  EXPECT_KILN_ERROR(data::DistributedSampler(10, 2, 2), "rank 2 is not in [0, 2)");
}

// ---- the loader ------------------------------------------------------------------------------

TEST(DataLoader, BatchesFollowTheSamplerAndCollate) {
  with_watchdog(seconds(60), [] {
    const auto dataset = std::make_shared<Numbers>(10);
    DataLoader loader(dataset, {.batch_size = 4});
    EXPECT_EQ(loader.size(), 3);
    std::vector<std::vector<int64_t>> seen;
    for (Batch& batch : loader.epoch(0)) {
      seen.push_back(labels_of(batch));
      EXPECT_EQ(batch.at("x").size(1), 2);
      EXPECT_EQ(batch.indices, seen.back());
      EXPECT_EQ(batch.metadata.front().at("path"), path_of(seen.back().front()));
    }
    EXPECT_EQ(seen, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
    DataLoader dropping(dataset, {.batch_size = 4, .drop_last = true, .num_workers = 2});
    EXPECT_EQ(dropping.size(), 2);
    int64_t batches = 0;
    for (Batch& batch : dropping.epoch(0)) batches += labels_of(batch).size() == 4;
    EXPECT_EQ(batches, 2);
    EXPECT_KILN_ERROR(DataLoader(dataset, {.batch_size = 0}), "batch_size must be >= 1");
  });
}

// Note [Loader order and errors]: shuffled, augmented, with samples finishing out of
// order, every worker count gives the same batches, bit for bit, in every epoch.
TEST(DataLoader, WorkerCountChangesNothing) {
  with_watchdog(seconds(120), [] {
    const auto dataset = std::make_shared<Numbers>(37, /*jitter=*/true);
    const auto noise = std::make_shared<AddNoise>();
    std::vector<std::vector<float>> reference;
    for (int64_t workers : {0, 1, 2, 8}) {
      DataLoader loader(
          dataset,
          {.batch_size = 5, .shuffle = true, .num_workers = workers, .transform = noise, .seed = 11});
      std::vector<std::vector<float>> got;
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        for (Batch& batch : loader.epoch(epoch))
          got.push_back(batch.at("x").reshape({-1}).to_vector<float>());
      }
      if (reference.empty()) {
        reference = got;
      } else {
        EXPECT_EQ(got, reference) << workers << " workers";
      }
    }
    EXPECT_NE(reference[0], reference[8]);  // the epochs differ
  });
}

// A resumed run starts an epoch part-way: the batches from there are the full epoch's, for
// any worker count; a start past the end is an error.
TEST(DataLoader, AnEpochStartedAtABatchIsTheTailOfTheFullEpoch) {
  with_watchdog(seconds(120), [] {
    const auto dataset = std::make_shared<Numbers>(23, /*jitter=*/true);
    const auto noise = std::make_shared<AddNoise>();
    for (int64_t workers : {0, 2}) {
      DataLoader loader(dataset,
                        {.batch_size = 4, .shuffle = true, .num_workers = workers, .transform = noise, .seed = 3});
      std::vector<std::vector<float>> full, tail;
      for (Batch& batch : loader.epoch(1)) full.push_back(batch.at("x").reshape({-1}).to_vector<float>());
      for (Batch& batch : loader.epoch(1, 4)) tail.push_back(batch.at("x").reshape({-1}).to_vector<float>());
      ASSERT_EQ(full.size(), 6u);
      EXPECT_EQ(tail, std::vector<std::vector<float>>(full.begin() + 4, full.end())) << workers << " workers";
      EXPECT_FALSE(loader.epoch(1, 6).next().has_value());
      EXPECT_KILN_ERROR(loader.epoch(1, 7), "DataLoader", "6 batches", "cannot start at batch 7");
    }
  });
}

TEST(DataLoader, AWorkerErrorNamesTheSampleAtItsBatch) {
  with_watchdog(seconds(60), [] {
    for (int64_t workers : {0, 2}) {
      DataLoader loader(std::make_shared<Numbers>(20, false, /*fail_at=*/13),
                        {.batch_size = 4, .num_workers = workers});
      data::DataLoader::Epoch epoch = loader.epoch(0);
      for (int b = 0; b < 3; ++b) EXPECT_TRUE(epoch.next().has_value());  // batches 0-2 arrive first
      EXPECT_KILN_ERROR(epoch.next(), "DataLoader: sample 13 (batch 3) of Numbers", "corrupt volume");
    }
  });
}

TEST(DataLoader, TimeoutTurnsAStuckSampleIntoAnError) {
  with_watchdog(seconds(60), [] {
    DataLoader loader(std::make_shared<Numbers>(8, false, -1, /*stall_at=*/5),
                      {.batch_size = 2, .num_workers = 2, .timeout = 0.3});
    data::DataLoader::Epoch epoch = loader.epoch(0);
    EXPECT_TRUE(epoch.next().has_value());
    EXPECT_TRUE(epoch.next().has_value());
    EXPECT_KILN_ERROR(epoch.next(), "batch 2 of Numbers was not ready after 0.3 s (timeout)");
  });  // leaving the epoch waits for the stalled sample (2 s), then joins
}

TEST(DataLoader, LeavingAnEpochEarlyStopsTheWorkersAndTheNextEpochWorks) {
  with_watchdog(seconds(60), [] {
    const auto dataset = std::make_shared<Numbers>(1000, /*jitter=*/true);
    DataLoader loader(dataset, {.batch_size = 2, .num_workers = 4, .prefetch_factor = 2});
    for (Batch& batch : loader.epoch(0)) {
      EXPECT_EQ(labels_of(batch), (std::vector<int64_t>{0, 1}));
      break;
    }
    // at most the batches the workers may be ahead (4 x 2) plus the one consumed were loaded
    EXPECT_LE(dataset->gets.load(), 2 * (4 * 2 + 1 + 4));
    int64_t count = 0;
    for (Batch& batch : loader.epoch(1)) count += static_cast<int64_t>(labels_of(batch).size());
    EXPECT_EQ(count, 1000);
  });
}

// A consumer that stops consuming holds the workers at the prefetch limit.
TEST(DataLoader, ASlowConsumerBoundsTheWorkAhead) {
  with_watchdog(seconds(60), [] {
    const auto dataset = std::make_shared<Numbers>(400);
    DataLoader loader(dataset, {.batch_size = 1, .num_workers = 2, .prefetch_factor = 3});
    data::DataLoader::Epoch epoch = loader.epoch(0);
    EXPECT_TRUE(epoch.next().has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_LE(dataset->gets.load(), 1 + 2 * 3 + 2);  // consumed + ahead + the two in hand
    int64_t rest = 0;
    while (epoch.next()) ++rest;
    EXPECT_EQ(rest, 399);
    EXPECT_EQ(loader.stats().batches, 400);
  });
}

TEST(DataLoader, PersistentWorkersStartOnceAndInitErrorsReachTheConsumer) {
  with_watchdog(seconds(60), [] {
    for (bool persistent : {false, true}) {
      std::atomic<int64_t> started{0};
      DataLoader loader(std::make_shared<Numbers>(12),
                        {.batch_size = 3,
                         .num_workers = 2,
                         .persistent_workers = persistent,
                         .worker_init_fn = [&started](int64_t) { ++started; }});
      for (int64_t e = 0; e < 3; ++e) {
        int64_t batches = 0;
        for (Batch& batch : loader.epoch(e)) batches += !labels_of(batch).empty();
        EXPECT_EQ(batches, 4);
      }
      EXPECT_EQ(started.load(), persistent ? 2 : 6);
    }
    DataLoader failing(std::make_shared<Numbers>(4), {.num_workers = 2, .worker_init_fn = [](int64_t w) {
                                                        if (w == 1)
                                                          throw std::runtime_error("no GPU for worker 1");
                                                      }});
    data::DataLoader::Epoch epoch = failing.epoch(0);
    EXPECT_KILN_ERROR(while (epoch.next()){}, "worker_init_fn(1): no GPU for worker 1");
  });
}

// Workers run the CPU kernels on one thread each; the consumer's own setting is untouched.
TEST(DataLoader, WorkersRunTheCpuKernelsSingleThreaded) {
  with_watchdog(seconds(60), [] {
    class ThreadCounts final : public data::Dataset {
     public:
      int64_t size() const override { return 8; }
      Sample get(int64_t index) const override {
        check_index(index);
        const int threads = backend(Device::cpu()).threads_of_this_thread();
        return {.tensors = {{"threads", full({}, threads, {.dtype = DType::Int64})}}, .metadata = {}};
      }
      std::string name() const override { return "ThreadCounts"; }
    };
    const int mine = backend(Device::cpu()).threads_of_this_thread();
    DataLoader loader(std::make_shared<ThreadCounts>(), {.batch_size = 4, .num_workers = 2});
    for (Batch& batch : loader.epoch(0)) EXPECT_EQ(batch.at("threads").max().item<int64_t>(), 1);
    DataLoader inline_loader(std::make_shared<ThreadCounts>(), {.batch_size = 4});
    for (Batch& batch : inline_loader.epoch(0)) EXPECT_EQ(batch.at("threads").max().item<int64_t>(), mine);
    EXPECT_EQ(backend(Device::cpu()).threads_of_this_thread(), mine);
  });
}

TEST(DataLoader, OneEpochAtATimeAndCollateErrors) {
  with_watchdog(seconds(60), [] {
    DataLoader loader(std::make_shared<Numbers>(4), {.batch_size = 2});
    data::DataLoader::Epoch first = loader.epoch(0);
    EXPECT_KILN_ERROR(loader.epoch(1), "an epoch is already in progress");
    std::vector<Sample> mismatched = {Numbers(2).get(0), Numbers(2).get(1)};
    mismatched[1].tensors["x"] = zeros({3});
    EXPECT_KILN_ERROR(data::default_collate(mismatched, {0, 1}),
                      "'x' of sample 1 is float32 [3], of sample 0 float32 [2]");
    // pin_memory without a GPU: plain memory, the same values
    const Batch pinned =
        data::default_collate({Numbers(2).get(0), Numbers(2).get(1)}, {0, 1}, /*pin_memory=*/true);
    EXPECT_EQ(labels_of(pinned), (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(pinned.at("x").is_pinned(), cuda_is_available());
  });
}

// A batch sampler makes the batches itself: uneven sizes, any order, any worker count.
class FixedBatches final : public data::BatchSampler {
 public:
  explicit FixedBatches(std::vector<std::vector<int64_t>> batches) : batches_(std::move(batches)) {}
  std::vector<std::vector<int64_t>> batches(int64_t) const override { return batches_; }
  int64_t size() const override { return static_cast<int64_t>(batches_.size()); }

 private:
  std::vector<std::vector<int64_t>> batches_;
};

TEST(DataLoader, ABatchSamplerMakesTheBatches) {
  with_watchdog(seconds(60), [] {
    const auto dataset = std::make_shared<Numbers>(6, /*jitter=*/true);
    const std::vector<std::vector<int64_t>> wanted = {{3, 1}, {0}, {2, 4, 5}};
    for (const int64_t workers : {0, 2}) {
      DataLoader loader(dataset,
                        {.batch_sampler = std::make_shared<FixedBatches>(wanted), .num_workers = workers});
      EXPECT_EQ(loader.size(), 3);
      std::vector<std::vector<int64_t>> got;
      for (Batch& batch : loader.epoch(0)) got.push_back(labels_of(batch));
      EXPECT_EQ(got, wanted) << workers << " workers";
    }
    // SamplerBatches is what batch_size and a sampler make.
    const data::SamplerBatches cut(std::make_shared<data::SequentialSampler>(5), 2, /*drop_last=*/true);
    EXPECT_EQ(cut.batches(0), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
    EXPECT_EQ(cut.size(), 2);
    EXPECT_KILN_ERROR(
        DataLoader(dataset, {.batch_size = 4, .batch_sampler = std::make_shared<FixedBatches>(wanted)}),
        "a batch_sampler makes the batches");
    EXPECT_KILN_ERROR(
        DataLoader(dataset, {.shuffle = true, .batch_sampler = std::make_shared<FixedBatches>(wanted)}),
        "a batch_sampler makes the batches");
    DataLoader empty(
        dataset, {.batch_sampler = std::make_shared<FixedBatches>(std::vector<std::vector<int64_t>>{{}})});
    EXPECT_KILN_ERROR(empty.epoch(0), "empty batch");
  });
}

}  // namespace
}  // namespace kiln
