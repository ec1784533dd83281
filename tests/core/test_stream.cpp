// kiln::Stream / Event / StreamGuard / record_stream on the CPU: a device without queues,
// where every call is a no-op that succeeds (so device-agnostic code, such as the
// DataLoader's DevicePrefetcher, needs no branches), and the argument checks every
// device shares. The CUDA behaviour is tests/cuda/test_cuda_stream_api.cpp.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "core/stream.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(StreamApi, TheCpuHasOneStreamAndEventsAreAlwaysComplete) {
  const Device cpu = Device::cpu();
  const Stream current = Stream::current(cpu);
  const Stream created = Stream::create(cpu);
  EXPECT_EQ(current.device(), cpu);
  EXPECT_EQ(current.id(), 0u);
  EXPECT_EQ(created, current);
  {
    StreamGuard guard(created);
    EXPECT_EQ(Stream::current(cpu), created);
  }
  Event event(/*enable_timing=*/true), start(/*enable_timing=*/true);
  EXPECT_FALSE(event.recorded());
  EXPECT_TRUE(event.query());  // never recorded: no constraint
  start.record(created);
  event.record(created);
  EXPECT_TRUE(event.recorded());
  EXPECT_TRUE(event.query());
  event.synchronize();
  created.wait(event);
  created.synchronize();
  EXPECT_EQ(event.elapsed_ms_since(start), 0.0);
  const Tensor t = ones({3});
  record_stream(t, created);
  EXPECT_TRUE(testing::all_equal(t, ones({3})));
}

TEST(StreamApi, ElapsedTimeNeedsTwoRecordedEvents) {
  Event start(true), end(true);
  EXPECT_KILN_ERROR(end.elapsed_ms_since(start), "both events must be recorded");
  end.record(Stream::current(Device::cpu()));
  EXPECT_KILN_ERROR(end.elapsed_ms_since(start), "both events must be recorded");
}

TEST(StreamApi, RecordStreamOfAnUndefinedTensorIsAnError) {
  EXPECT_THROW(record_stream(Tensor(), Stream::current(Device::cpu())), Error);
}

}  // namespace
}  // namespace kiln
