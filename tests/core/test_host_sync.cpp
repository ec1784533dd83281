// Host syncs (core/host_sync.h): the per-thread counters, and Note [No host syncs in a
// capture]: while a thread captures a CUDA graph, a sync on a GPU is an error naming it,
// while the CPU's counted syncs (a number read from a CPU tensor) stay allowed. The CUDA
// graph's own tests (tests/cuda/test_cuda_graph.cpp) check the real capture.
#include <gtest/gtest.h>

#include <thread>

#include "core/host_sync.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(HostSync, CountsPerKindOnThisThread) {
  const HostSyncs before = host_syncs();
  note_host_sync(HostSync::Item, Device::cpu());
  note_host_sync(HostSync::Synchronize, Device::cuda(0));
  note_host_sync(HostSync::CopyToHost, Device::cuda(0));
  note_host_sync(HostSync::IndexCheck, Device::cuda(0));
  const HostSyncs counted = host_syncs() - before;
  EXPECT_EQ(counted.item, 1);
  EXPECT_EQ(counted.synchronize, 1);
  EXPECT_EQ(counted.copy_to_host, 1);
  EXPECT_EQ(counted.index_check, 1);
}

TEST(HostSync, AGpuSyncDuringACaptureIsAnErrorNamingIt) {
  {
    const CaptureOnThisThread capture;
    EXPECT_TRUE(capturing_on_this_thread());
    EXPECT_KILN_ERROR(note_host_sync(HostSync::Synchronize, Device::cuda(0)), "CUDA graph capture",
                      "a synchronize", "cuda:0");
    EXPECT_KILN_ERROR(note_host_sync(HostSync::Item, Device::cuda(0)), "item()");
    EXPECT_KILN_ERROR(note_host_sync(HostSync::CopyToHost, Device::cuda(0)), "blocking copy");
    EXPECT_KILN_ERROR(note_host_sync(HostSync::IndexCheck, Device::cuda(0)), "bounds check");
    EXPECT_EQ(full({1}, 2.0).item().to_double(), 2.0);  // the CPU's: allowed
    EXPECT_KILN_ERROR(CaptureOnThisThread{}, "already under way");
    std::thread([] { EXPECT_FALSE(capturing_on_this_thread()); }).join();  // per thread
  }
  EXPECT_FALSE(capturing_on_this_thread());
  note_host_sync(HostSync::Synchronize, Device::cuda(0));  // counted, no error once it ends
}

}  // namespace
}  // namespace kiln
