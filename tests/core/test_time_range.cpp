// TimeRange and Timeline (core/time_range.h): nothing is recorded while no Timeline
// collects; nested ranges get their depth and times in order; ranges on several threads
// are all collected, each thread numbered; a range open at stop() is left out; one
// Timeline at a time. And the host-sync counters (core/host_sync.h): item() and to_vector()
// count on the CPU too, a CPU copy and a CPU synchronize do not.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "core/backend.h"
#include "core/host_sync.h"
#include "core/ops.h"
#include "core/time_range.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

TEST(TimeRange, NothingIsRecordedWhileNoTimelineCollects) {
  { TimeRange ignored("before"); }
  Timeline timeline;
  EXPECT_TRUE(timeline.stop().empty());
  { TimeRange ignored("after"); }
  EXPECT_TRUE(timeline.stop().empty());
}

TEST(TimeRange, NestedRangesHaveDepthAndOrderedTimes) {
  Timeline timeline;
  {
    TimeRange step("step");
    {
      TimeRange forward("forward");
      std::this_thread::sleep_for(20ms);
    }
    TimeRange backward("backward");
    std::this_thread::sleep_for(10ms);
  }
  const auto records = timeline.stop();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].name, "step");
  EXPECT_EQ(records[0].depth, 0);
  EXPECT_EQ(records[1].name, "forward");
  EXPECT_EQ(records[1].depth, 1);
  EXPECT_EQ(records[2].name, "backward");
  EXPECT_EQ(records[2].depth, 1);
  EXPECT_GE(records[1].seconds(), 0.019);
  EXPECT_GE(records[0].seconds(), records[1].seconds() + records[2].seconds());
  EXPECT_LE(records[1].end_s, records[2].start_s);
  EXPECT_FALSE(records[0].device_ms.has_value());
}

TEST(TimeRange, RangesOnSeveralThreadsAreCollectedAndAnOpenOneIsLeftOut) {
  testing::with_watchdog(std::chrono::seconds(60), [] {
    Timeline timeline;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([t] {
        for (int i = 0; i < 10; ++i) TimeRange range("work " + std::to_string(t));
      });
    for (std::thread& t : threads) t.join();
    TimeRange still_open("open");
    const auto records = timeline.stop();
    EXPECT_EQ(records.size(), 40u);
    std::set<uint64_t> thread_numbers;
    for (const auto& r : records) thread_numbers.insert(r.thread);
    EXPECT_EQ(thread_numbers.size(), 4u);
    EXPECT_KILN_ERROR(
        {
          Timeline first;
          Timeline second;
        },
        "another Timeline is already collecting");
  });
}

TEST(HostSync, ItemAndToVectorCountOnTheCpuCopiesAndSynchronizeDoNot) {
  const Tensor t = ones({3});
  const HostSyncs before = host_syncs();
  (void)t.sum().item<float>();
  (void)t.to_vector<float>();
  (void)t.cpu().clone();  // a CPU tensor stays where it is: nothing to wait for
  synchronize(Device::cpu());
  const HostSyncs counted = host_syncs() - before;
  EXPECT_EQ(counted.item, 2);
  EXPECT_EQ(counted.copy_to_host, 0);
  EXPECT_EQ(counted.synchronize, 0);
  EXPECT_EQ(counted.total(), 2);
}

// The counts are the calling thread's: another thread's reads (a loader worker's) are not.
TEST(HostSync, CountsAreTheCallingThreads) {
  const HostSyncs before = host_syncs();
  std::thread other([] { (void)ones({2}).sum().item<float>(); });
  other.join();
  EXPECT_EQ((host_syncs() - before).total(), 0);
}

}  // namespace
}  // namespace kiln
