// Streams, events and the device guard (kernels/cuda/stream.h, event.h, runtime.h) on a GPU.
#include <gtest/gtest.h>

#include <thread>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/event.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/stream.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln::cuda {
namespace {

TEST(CudaStreams, DeviceCountAndPropertiesAgree) {
  std::string reason;
  const int count = device_count(&reason);
  EXPECT_EQ(count > 0, is_available());
  if (count == 0) {
    EXPECT_FALSE(reason.empty());
    EXPECT_KILN_ERROR(device_properties(0), "out of range");
    return;
  }
  const DeviceProperties& p = device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.multiprocessors, 0);
  EXPECT_GT(p.total_memory, size_t{0});
  EXPECT_EQ(p.warp_size, 32);
  EXPECT_KILN_ERROR(device_properties(count), "device index", "out of range");
}

TEST(CudaStreams, CurrentStreamDefaultsToTheDefaultStreamAndGuardRestoresIt) {
  KILN_REQUIRE_CUDA();
  EXPECT_EQ(current_stream(0), Stream::default_stream(0));
  OwnedStream side(0);
  {
    StreamGuard guard(side);
    EXPECT_EQ(current_stream(0), side.stream());
    {
      StreamGuard back(Stream::default_stream(0));
      EXPECT_EQ(current_stream(0), Stream::default_stream(0));
    }
    EXPECT_EQ(current_stream(0), side.stream());
  }
  EXPECT_EQ(current_stream(0), Stream::default_stream(0));
}

TEST(CudaStreams, CurrentStreamIsPerThread) {
  KILN_REQUIRE_CUDA();
  OwnedStream side(0);
  StreamGuard guard(side);
  Stream seen_by_other = side.stream();
  std::thread([&] { seen_by_other = current_stream(0); }).join();
  EXPECT_EQ(seen_by_other, Stream::default_stream(0));
}

TEST(CudaStreams, EventsOrderAndTimeWork) {
  KILN_REQUIRE_CUDA();
  OwnedStream stream(0);
  Event unrecorded;
  EXPECT_TRUE(unrecorded.query());  // nothing to wait for
  void* buffer = nullptr;
  KILN_CUDA_CHECK(cudaMalloc(&buffer, 64 << 20));
  Event start(/*enable_timing=*/true), stop(/*enable_timing=*/true);
  start.record(stream);
  KILN_CUDA_CHECK(cudaMemsetAsync(buffer, 1, 64 << 20, stream.stream().handle()));
  stop.record(stream);
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  EXPECT_TRUE(stream.stream().query());
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0f);
  // The default stream waits for the side stream's event, then reads what it wrote.
  stop.block(Stream::default_stream(0));
  unsigned char first = 0;
  KILN_CUDA_CHECK(cudaMemcpy(&first, buffer, 1, cudaMemcpyDeviceToHost));
  EXPECT_EQ(first, 1);
  KILN_CUDA_CHECK(cudaFree(buffer));
  EXPECT_KILN_ERROR(unrecorded.elapsed_ms_since(start), "not recorded");
}

TEST(CudaStreams, DeviceGuardRestoresTheCurrentDevice) {
  KILN_REQUIRE_CUDA();
  const int before = current_device();
  {
    DeviceGuard guard(device_count() - 1);
    EXPECT_EQ(current_device(), device_count() - 1);
  }
  EXPECT_EQ(current_device(), before);
  EXPECT_KILN_ERROR(set_device(device_count()), "out of range");
}

TEST(CudaStreams, FailedRuntimeCallsAreErrorsNamingTheCall) {
  KILN_REQUIRE_CUDA();
  // An invalid copy direction fails in argument checking, before anything reaches the
  // device (a copy from a bad device address could instead fault the context for good).
  char from[8] = {}, to[8] = {};
  EXPECT_KILN_ERROR(KILN_CUDA_CHECK(cudaMemcpy(to, from, sizeof(to), static_cast<cudaMemcpyKind>(42))),
                    "CUDA error", "cudaErrorInvalidMemcpyDirection", "cudaMemcpy", "test_cuda_streams.cpp");
  // The error was cleared: the next call succeeds.
  EXPECT_NO_THROW(KILN_CUDA_CHECK(cudaDeviceSynchronize()));
}

}  // namespace
}  // namespace kiln::cuda
