// DevicePrefetcher (data/prefetcher.h) on the CPU: a pass-through that hands over the
// loader's own batches, in order, with the loader's errors where the loader raises them
// and no copy time. The GPU behaviour is tests/cuda/test_cuda_prefetcher.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "data/prefetcher.h"
#include "tests/data/numbers_dataset.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::Batch;
using data::DataLoader;
using data::DevicePrefetcher;
using testing::Numbers;

TEST(DevicePrefetcher, OnTheCpuItPassesTheLoadersBatchesThrough) {
  testing::with_watchdog(std::chrono::seconds(60), [] {
    DataLoader loader(std::make_shared<Numbers>(10),
                      {.batch_size = 3, .shuffle = true, .num_workers = 2, .seed = 4});
    DataLoader reference(std::make_shared<Numbers>(10), {.batch_size = 3, .shuffle = true, .seed = 4});
    DevicePrefetcher prefetcher(loader, Device::cpu());
    EXPECT_EQ(prefetcher.device(), Device::cpu());
    std::vector<std::vector<int64_t>> seen, expected;
    for (Batch& batch : prefetcher.epoch(1)) {
      EXPECT_TRUE(batch.at("x").device().is_cpu());
      seen.push_back(batch.at("label").to_vector<int64_t>());
    }
    for (Batch& batch : reference.epoch(1)) expected.push_back(batch.at("label").to_vector<int64_t>());
    EXPECT_EQ(seen, expected);
    const data::LoaderStats stats = prefetcher.stats();
    EXPECT_EQ(stats.batches, 4);
    EXPECT_EQ(stats.copy_seconds, 0.0);
    EXPECT_EQ(stats.copy_wait_seconds, 0.0);
  });
}

TEST(DevicePrefetcher, ALoaderErrorArrivesAtItsBatch) {
  testing::with_watchdog(std::chrono::seconds(60), [] {
    DataLoader loader(std::make_shared<Numbers>(10, false, /*fail_at=*/7),
                      {.batch_size = 2, .num_workers = 2});
    DevicePrefetcher prefetcher(loader, Device::cpu());
    DevicePrefetcher::Epoch epoch = prefetcher.epoch(0);
    EXPECT_THROW(prefetcher.epoch(1), Error);  // one epoch at a time; the first goes on
    for (int64_t b = 0; b < 3; ++b) ASSERT_TRUE(epoch.next().has_value()) << "batch " << b;
    EXPECT_KILN_ERROR(epoch.next(), "sample 7", "corrupt volume");
    // The epoch goes on past the bad batch, as the loader's does.
    const std::optional<Batch> after = epoch.next();
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->at("label").to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
    EXPECT_FALSE(epoch.next().has_value());
  });
}

}  // namespace
}  // namespace kiln
