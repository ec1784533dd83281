// CUDA graphs (core/cuda_graph.h, kernels/cuda/graph.h) on a GPU: replays compute what the
// eager ops compute, on new inputs copied into the captured tensors; tensors made during a
// capture keep their memory (no eager allocation is handed it) and replays allocate
// nothing; a host sync or a pageable copy during a capture is the named error, after which
// the capture can still end; a second capture of the same work updates the instance in
// place; a capture whose body throws is abandoned; random ops draw fresh numbers at each
// replay, exactly the eager draws (Note [Philox under capture]); a bad index in any replay
// is the op's error at the next check (Note [Index checks in a CUDA graph]). Without a
// GPU these skip, except the CPU's refusal, which runs everywhere.
#include <gtest/gtest.h>

#include <thread>

#include "core/cuda_graph.h"
#include "core/deferred_check.h"
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

// Dropout and a noise draw in a graph: each replay draws what the next eager run of the
// same work draws from the same generator state, so replays differ from one another.
TEST(CudaGraph, ReplaysDrawFreshNumbersEqualToEagerDraws) {
  KILN_REQUIRE_CUDA();
  const Tensor x = full({300}, 1.0, kOnGpu);
  const auto noisy = [&] { return add(dropout(x, 0.5), randn({300}, kOnGpu)); };
  manual_seed(11);
  noisy();  // warm-up
  CudaGraph graph(kCuda);
  Tensor y;
  graph.capture([&] { y = noisy(); });
  EXPECT_EQ(graph.random_blocks_per_replay(default_generator(kCuda)), 150u + 150u);
  const PhiloxState before = default_generator(kCuda).state();
  std::vector<Tensor> replayed;
  for (int i = 0; i < 3; ++i) {
    graph.replay();
    replayed.push_back(y.clone());
  }
  EXPECT_EQ(default_generator(kCuda).offset(), before.offset + 3 * 300) << "each replay advances the generator";
  EXPECT_FALSE(testing::all_equal(replayed[0], replayed[1]));
  default_generator(kCuda).set_state(before);  // the eager runs from the same point
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(testing::all_equal(replayed[i], noisy())) << "replay " << i;
}

TEST(CudaGraph, AGeneratorNotRegisteredIsANamedErrorAndARegisteredOneReplays) {
  KILN_REQUIRE_CUDA();
  Generator own(5), eager(5);
  CudaGraph graph(kCuda);
  EXPECT_KILN_ERROR(graph.capture([&] { (void)rand({8}, kOnGpu, &own); }), "rand", "register_generator");
  graph.register_generator(own);
  Tensor y;
  graph.capture([&] { y = rand({8}, kOnGpu, &own); });
  graph.replay();
  EXPECT_TRUE(testing::all_equal(y, rand({8}, kOnGpu, &eager)));
  graph.replay();
  EXPECT_TRUE(testing::all_equal(y, rand({8}, kOnGpu, &eager)));
}

// A bounds-checked gather in a graph: the replay whose index is bad (the second of four)
// is still found at the scope's check after the last one, naming the op and the index.
TEST(CudaGraph, ABadIndexInAnyReplayIsTheOpsErrorAtTheNextCheck) {
  KILN_REQUIRE_CUDA();
  const Tensor table = arange(5, {.dtype = DType::Float32, .device = kCuda});
  Tensor index = zeros({3}, {.dtype = DType::Int64, .device = kCuda});
  Tensor y;
  DeferIndexChecks deferred;
  (void)gather(table, 0, index);  // warm-up
  deferred.check();
  CudaGraph graph(kCuda);
  graph.capture([&] { y = gather(table, 0, index); });
  EXPECT_EQ(deferred.pending(), 0u);
  for (int step = 0; step < 4; ++step) {
    index.copy_(full({3}, step == 1 ? 9.0 : 2.0, {.dtype = DType::Int64, .device = kCuda}));
    graph.replay();
    EXPECT_EQ(deferred.pending(), 1u) << "one check queued for the replays until it runs";
  }
  EXPECT_KILN_ERROR(deferred.check(), "gather", "index 9 is out of bounds for dimension 0 with size 5");
  // A graph whose replays all see good indices passes its checks.
  CudaGraph clean(kCuda);
  index.copy_(full({3}, 1.0, {.dtype = DType::Int64, .device = kCuda}));
  clean.capture([&] { y = gather(table, 0, index); });
  clean.replay();
  clean.replay();
  deferred.check();
  EXPECT_TRUE(testing::all_equal(y, full({3}, 1.0, kOnGpu)));
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
