// CUDA graphs (core/cuda_graph.h, kernels/cuda/graph.h) on a GPU: replays compute what the
// eager ops compute, on new inputs copied into the captured tensors; tensors made during a
// capture keep their memory (no eager allocation is handed it) and replays allocate
// nothing; a host sync or a pageable copy during a capture is the named error, after which
// the capture can still end; a second capture of the same work updates the instance in
// place; a capture whose body throws is abandoned. Without a GPU these skip, except the
// CPU's refusal, which runs everywhere.
#include <gtest/gtest.h>

#include <thread>

#include "core/cuda_graph.h"
#include "core/stream.h"
#include "core/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using testing::kCuda;
const TensorOptions kOnGpu{.dtype = DType::Float32, .device = kCuda};

// The captured work: a few elementwise ops and a reduction, as a step's tail has.
Tensor work(const Tensor& x) { return sum(relu(add(mul(x, 2.0), 1.0)), {1}); }

TEST(CudaGraph, TheCpuHasNoGraphs) {
  EXPECT_KILN_ERROR(CudaGraph{Device::cpu()}, "CudaGraph", "cpu");
}

TEST(CudaGraph, ReplaysComputeWhatEagerComputesOnNewInputs) {
  KILN_REQUIRE_CUDA();
  Generator generator(3);
  Tensor x = randn({64, 33}, kOnGpu, &generator);  // the graph's static input
  work(x);  // warm-up: lazily made state is made eagerly
  CudaGraph graph(kCuda);
  graph.capture_begin();
  const Tensor y = work(x);
  graph.capture_end();
  EXPECT_EQ(graph.captures(), 1);
  for (int step = 0; step < 3; ++step) {
    const Tensor next = randn({64, 33}, kOnGpu, &generator);
    x.copy_(next);
    graph.replay();
    EXPECT_TRUE(testing::all_equal(y, work(next))) << "replay " << step;
  }
}

TEST(CudaGraph, CapturedTensorsKeepTheirMemoryAndReplaysAllocateNothing) {
  KILN_REQUIRE_CUDA();
  const Tensor x = full({1024, 256}, 0.5, kOnGpu);
  work(x);
  CudaGraph graph(kCuda);
  graph.capture_begin();
  const Tensor y = work(x);
  graph.capture_end();
  // Eager tensors of the captured ones' sizes never land on their memory.
  for (int i = 0; i < 8; ++i) {
    const Tensor eager = work(x);
    EXPECT_NE(eager.data_ptr(), y.data_ptr());
  }
  graph.replay();
  synchronize(kCuda);
  const AllocatorStats before = memory_stats(kCuda);
  for (int i = 0; i < 100; ++i) graph.replay();
  synchronize(kCuda);
  const AllocatorStats after = memory_stats(kCuda);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_TRUE(testing::all_equal(y, work(x)));
}

TEST(CudaGraph, AHostSyncDuringACaptureIsTheNamedErrorAndTheCaptureCanStillEnd) {
  KILN_REQUIRE_CUDA();
  Tensor x = full({16}, 1.0, kOnGpu);
  CudaGraph graph(kCuda);
  graph.capture_begin();
  const Tensor y = mul(x, 3.0);
  EXPECT_KILN_ERROR(sum(y).item(), "CUDA graph capture", "item()");
  EXPECT_KILN_ERROR(synchronize(kCuda), "CUDA graph capture", "synchronize");
  EXPECT_KILN_ERROR(y.to(Device::cpu()), "CUDA graph capture", "copy");
  EXPECT_KILN_ERROR(x.copy_(full({16}, 2.0)), "CUDA graph capture", "pageable");
  graph.capture_end();
  graph.replay();
  EXPECT_TRUE(testing::all_equal(y, full({16}, 3.0, kOnGpu)));
}

TEST(CudaGraph, ASecondCaptureOfTheSameWorkUpdatesTheInstanceInPlace) {
  KILN_REQUIRE_CUDA();
  const Tensor a = full({32, 8}, 1.0, kOnGpu), b = full({32, 8}, 2.0, kOnGpu);
  work(a);
  CudaGraph graph(kCuda);
  graph.capture_begin();
  const Tensor ya = work(a);
  graph.capture_end();
  graph.capture_begin();
  const Tensor yb = work(b);  // same kernels, other addresses
  graph.capture_end();
  EXPECT_EQ(graph.captures(), 2);
  EXPECT_EQ(graph.updates(), 1);
  graph.replay();
  EXPECT_TRUE(testing::all_equal(yb, work(b)));
}

// A scoped capture whose body throws puts the thread back: the stream, the allocations and
// the capture flag; a later capture and eager work run normally.
TEST(CudaGraph, ACaptureWhoseBodyThrowsIsAbandoned) {
  KILN_REQUIRE_CUDA();
  const Tensor x = full({16}, 1.0, kOnGpu);
  const Stream before = Stream::current(kCuda);
  CudaGraph graph(kCuda);
  EXPECT_KILN_ERROR(graph.capture([&] {
    (void)mul(x, 2.0);
    KILN_CHECK(false, "the step failed");
  }), "the step failed");
  EXPECT_EQ(Stream::current(kCuda), before);
  EXPECT_EQ(graph.captures(), 0);
  Tensor y;
  graph.capture([&] { y = mul(x, 2.0); });
  graph.replay();
  EXPECT_TRUE(testing::all_equal(y, full({16}, 2.0, kOnGpu)));
  EXPECT_EQ(sum(y).item().to_double(), 32.0);  // eager syncs work again
}

TEST(CudaGraph, MisuseIsAClearError) {
  KILN_REQUIRE_CUDA();
  CudaGraph graph(kCuda);
  EXPECT_KILN_ERROR(graph.replay(), "replay before any capture_end");
  EXPECT_KILN_ERROR(graph.capture_end(), "capture_end without capture_begin");
  graph.capture_begin();
  EXPECT_KILN_ERROR(graph.capture_begin(), "capture_begin twice");
  CudaGraph other(kCuda);
  EXPECT_KILN_ERROR(other.capture_begin(), "already under way");  // captures do not nest
  std::thread([&] { EXPECT_KILN_ERROR(graph.capture_end(), "another thread"); }).join();
  graph.capture_end();
}

}  // namespace
}  // namespace kiln
