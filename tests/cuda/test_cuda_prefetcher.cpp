// DevicePrefetcher (data/prefetcher.h) on a GPU: the batches arrive on the device, in the
// loader's order, equal to the loader's own (pinned or pageable, 0 or 2 workers), also
// when the consumer's kernels on them are still running while later batches are copied;
// an error loading batch k arrives at batch k after every earlier batch; the copy time is
// measured. Skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "data/prefetcher.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/data/numbers_dataset.h"

namespace kiln {
namespace {

using data::Batch;
using data::DataLoader;
using data::DevicePrefetcher;
using testing::kCuda;
using testing::Numbers;

TEST(CudaPrefetcher, BatchesArriveOnTheDeviceInOrderAndEqualToTheLoaders) {
  KILN_REQUIRE_CUDA();
  testing::with_watchdog(std::chrono::seconds(120), [] {
    for (const bool pin : {false, true}) {
      for (const int64_t workers : {0, 2}) {
        SCOPED_TRACE(::testing::Message() << "pin_memory " << pin << ", workers " << workers);
        const auto dataset = std::make_shared<Numbers>(23);
        DataLoader loader(
            dataset,
            {.batch_size = 4, .shuffle = true, .num_workers = workers, .pin_memory = pin, .seed = 9});
        DataLoader reference(dataset, {.batch_size = 4, .shuffle = true, .seed = 9});
        DevicePrefetcher prefetcher(loader, kCuda);
        std::vector<Tensor> sums;  // consumer work queued on each batch, read at the end
        std::vector<std::vector<int64_t>> labels;
        for (Batch& batch : prefetcher.epoch(2)) {
          EXPECT_EQ(batch.at("x").device(), kCuda);
          EXPECT_EQ(batch.metadata.size(), batch.indices.size());
          sums.push_back(batch.at("x").add(batch.at("x")).sum());
          labels.push_back(batch.at("label").cpu().to_vector<int64_t>());
        }
        std::vector<std::vector<int64_t>> expected;
        size_t b = 0;
        for (Batch& batch : reference.epoch(2)) {
          expected.push_back(batch.at("label").to_vector<int64_t>());
          ASSERT_LT(b, sums.size());
          EXPECT_EQ(sums[b++].cpu().item<double>(), batch.at("x").add(batch.at("x")).sum().item<double>())
              << "batch " << b;
        }
        EXPECT_EQ(labels, expected);
        EXPECT_GT(prefetcher.stats().copy_seconds, 0.0);
        EXPECT_EQ(prefetcher.stats().batches, 6);
      }
    }
  });
}

TEST(CudaPrefetcher, ALoaderErrorArrivesAtItsBatchAfterTheEarlierOnes) {
  KILN_REQUIRE_CUDA();
  testing::with_watchdog(std::chrono::seconds(60), [] {
    DataLoader loader(std::make_shared<Numbers>(10, false, /*fail_at=*/7),
                      {.batch_size = 2, .num_workers = 2, .pin_memory = true});
    DevicePrefetcher prefetcher(loader, kCuda);
    DevicePrefetcher::Epoch epoch = prefetcher.epoch(0);
    EXPECT_THROW(prefetcher.epoch(1), Error);  // one epoch at a time; the first goes on
    for (int64_t b = 0; b < 3; ++b) {
      const std::optional<Batch> batch = epoch.next();
      ASSERT_TRUE(batch.has_value()) << "batch " << b;
      EXPECT_EQ(batch->at("label").cpu().to_vector<int64_t>(), (std::vector<int64_t>{2 * b, 2 * b + 1}));
    }
    EXPECT_KILN_ERROR(epoch.next(), "sample 7", "corrupt volume");
    // The epoch goes on past the bad batch, as the loader's does.
    const std::optional<Batch> after = epoch.next();
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->at("label").cpu().to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
    EXPECT_FALSE(epoch.next().has_value());
  });
}

}  // namespace
}  // namespace kiln
