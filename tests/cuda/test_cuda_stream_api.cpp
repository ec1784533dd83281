// The public stream API (core/stream.h) on a GPU: created streams are distinct and
// non-default, StreamGuard switches the current stream and restores it, an event recorded
// on one stream orders another (work on the second sees everything the first queued
// before the event), timing events measure, and record_stream keeps a block from being
// reused while another stream still uses it. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/ops.h"
#include "core/stream.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
const TensorOptions kOnGpu{.dtype = DType::Float32, .device = kCuda};

TEST(CudaStreamApi, CreatedStreamsAreDistinctAndTheGuardRestoresTheCurrentOne) {
  KILN_REQUIRE_CUDA();
  const Stream default_stream = Stream::current(kCuda);
  EXPECT_EQ(default_stream.id(), 0u);
  const Stream a = Stream::create(kCuda), b = Stream::create(kCuda);
  EXPECT_NE(a.id(), 0u);
  EXPECT_NE(a, b);
  {
    StreamGuard on_a(a);
    EXPECT_EQ(Stream::current(kCuda), a);
    {
      StreamGuard on_b(b);
      EXPECT_EQ(Stream::current(kCuda), b);
    }
    EXPECT_EQ(Stream::current(kCuda), a);
  }
  EXPECT_EQ(Stream::current(kCuda), default_stream);
}

// 64 M floats incremented 40 times on stream A (tens of milliseconds of work) and read on
// stream B after B waits for an event recorded on A: B must see the final values. Without
// the wait, B's copy would start while A is still adding.
TEST(CudaStreamApi, AnEventOrdersAnotherStreamWithoutBlockingTheHost) {
  KILN_REQUIRE_CUDA();
  const Stream a = Stream::create(kCuda), b = Stream::create(kCuda);
  Tensor x;
  Event done;
  {
    StreamGuard on_a(a);
    x = zeros({int64_t{1} << 26}, kOnGpu);
    const Tensor one = ones({}, kOnGpu);
    for (int i = 0; i < 40; ++i) x.add_(one);
    done.record(a);
  }
  Tensor copy;
  {
    StreamGuard on_b(b);
    b.wait(done);
    copy = x.clone();
    record_stream(x, b);  // x, allocated on A, is read on B
  }
  b.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_EQ(copy.amin().item<double>(), 40.0);
  EXPECT_EQ(copy.amax().item<double>(), 40.0);
}

TEST(CudaStreamApi, TimingEventsMeasureTheWorkBetweenThem) {
  KILN_REQUIRE_CUDA();
  const Stream s = Stream::current(kCuda);
  Event start(true), end(true);
  Tensor x = ones({int64_t{1} << 24}, kOnGpu);
  start.record(s);
  for (int i = 0; i < 10; ++i) x.mul_(1.0001);
  end.record(s);
  end.synchronize();
  EXPECT_GT(end.elapsed_ms_since(start), 0.0);
  Event untimed;
  untimed.record(s);
  untimed.synchronize();
  EXPECT_KILN_ERROR(untimed.elapsed_ms_since(start), "enable_timing");
}

// A block freed after being recorded on a busy stream B is not handed out again on its
// own stream A until B's work is done.
TEST(CudaStreamApi, RecordStreamHoldsAFreedBlockUntilTheOtherStreamIsDone) {
  KILN_REQUIRE_CUDA();
  if (const char* no_caching = std::getenv("KILN_CUDA_NO_CACHING"); no_caching && std::string(no_caching) != "0") {
    GTEST_SKIP() << "KILN_CUDA_NO_CACHING: every free is a cudaFree, which waits for all streams, so the block "
                    "may rightly come back at once";
  }
  const Stream a = Stream::create(kCuda), b = Stream::create(kCuda);
  StreamGuard on_a(a);
  const int64_t n = int64_t{1} << 24;
  Tensor shared = ones({n}, kOnGpu);
  const void* block = shared.data_ptr();
  Tensor busy = zeros({int64_t{1} << 26}, kOnGpu);
  {
    StreamGuard on_b(b);
    const Tensor one = ones({}, kOnGpu);
    for (int i = 0; i < 40; ++i) busy.add_(one);  // keeps B busy for a while
    record_stream(shared, b);
    record_stream(busy, b);
  }
  shared = Tensor();  // freed while B may still be running
  const Tensor next = empty({n}, kOnGpu);
  EXPECT_NE(next.data_ptr(), block) << "the block was reused while stream B could still use it";
  b.synchronize();
}

TEST(CudaStreamApi, MismatchedDevicesAreErrors) {
  KILN_REQUIRE_CUDA();
  EXPECT_KILN_ERROR(record_stream(ones({2}), Stream::current(kCuda)), "record_stream");
  Event on_gpu;
  on_gpu.record(Stream::current(kCuda));
  EXPECT_KILN_ERROR(Stream::current(Device::cpu()).wait(on_gpu), "Stream::wait");
}

}  // namespace
}  // namespace kiln
