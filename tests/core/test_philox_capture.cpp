// Random numbers under a CUDA graph capture (Note [Philox under capture], core/generator.h),
// on the CPU: a generator in capture mode hands out states relative to a base in memory,
// a kernel resolves them when it runs, and a replay's base {seed, offset} taken with
// advance() makes replay k draw what the k-th eager run of the same draws gives. The CPU
// backend reads a base in host memory, so the arithmetic is checked here without a GPU
// (tests/cuda/test_cuda_graph.cpp replays real graphs). Also the misuses, each a named error.
#include <gtest/gtest.h>

#include <array>
#include <thread>

#include "core/backend.h"
#include "core/device_values.h"
#include "core/host_sync.h"
#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::all_equal;

constexpr uint64_t kSeed = 20261201;

// One "step" of draws: what a captured body with a dropout and a noise draw reserves.
struct Draws {
  Tensor uniform, mask, noise;
};
Draws draw_step(Generator& g) {
  return {rand({5}, {}, &g), bernoulli({7}, 0.5, {}, &g), randn({4, 3}, {}, &g)};
}

// The same draws as draw_step, made by the kernels from the states a capture handed out:
// what a replay's kernels do.
Draws replay_draws(const std::array<PhiloxState, 3>& captured) {
  Draws d{empty({5}), empty({7}), empty({4, 3})};
  Backend& cpu = backend(Device::cpu());
  cpu.uniform(d.uniform, 0.0, 1.0, captured[0]);
  cpu.bernoulli(d.mask, 0.5, captured[1]);
  cpu.normal(d.noise, 0.0, 1.0, captured[2]);
  return d;
}

TEST(PhiloxCapture, ACaptureHandsOutStatesRelativeToItsBaseAndLeavesTheGeneratorAlone) {
  Generator g(kSeed);
  rand({10}, {}, &g);  // offset 5 before the capture
  const Tensor base = zeros({2}, {.dtype = DType::Int64});
  const auto* words = static_cast<const uint64_t*>(base.data_ptr());
  g.begin_capture(Device::cpu(), words);
  EXPECT_TRUE(g.capturing());
  const PhiloxState a = g.reserve(5);  // 3 blocks
  const PhiloxState b = g.reserve(7);  // 4 blocks
  EXPECT_EQ(a.base, words);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(b.offset, 3u);
  EXPECT_EQ(g.end_capture(), 7u);
  EXPECT_FALSE(g.capturing());
  EXPECT_EQ(g.offset(), 5u) << "a capture draws nothing itself";
  EXPECT_EQ(g.seed(), kSeed);
}

TEST(PhiloxCapture, ReplaysDrawWhatEagerStepsDrawStepAfterStep) {
  Generator eager(kSeed), captured(kSeed);
  rand({3}, {}, &eager);  // both generators a few blocks in before the "graph"
  rand({3}, {}, &captured);
  Tensor base = zeros({2}, {.dtype = DType::Int64});
  captured.begin_capture(Device::cpu(), static_cast<const uint64_t*>(base.data_ptr()));
  const std::array<PhiloxState, 3> states = {captured.reserve(5), captured.reserve(7), captured.reserve(12)};
  const uint64_t blocks = captured.end_capture();
  EXPECT_EQ(blocks, 3u + 4u + 6u);
  for (int step = 0; step < 4; ++step) {
    const PhiloxState start = captured.advance(blocks);  // what CudaGraph::replay does
    const std::array<uint64_t, 2> words = {start.seed, start.offset};
    write_words_(base, words);
    const Draws replayed = replay_draws(states);
    const Draws expected = draw_step(eager);
    EXPECT_TRUE(all_equal(replayed.uniform, expected.uniform)) << "step " << step;
    EXPECT_TRUE(all_equal(replayed.mask, expected.mask)) << "step " << step;
    EXPECT_TRUE(all_equal(replayed.noise, expected.noise)) << "step " << step;
  }
  EXPECT_EQ(captured.offset(), eager.offset());
  // And steps differ from one another, as eager dropout masks do.
  const PhiloxState first = {kSeed, 2, nullptr}, second = {kSeed, 2 + blocks, nullptr};
  Tensor x = empty({5}), y = empty({5});
  backend(Device::cpu()).uniform(x, 0.0, 1.0, first);
  backend(Device::cpu()).uniform(y, 0.0, 1.0, second);
  EXPECT_FALSE(all_equal(x, y));
}

TEST(PhiloxCapture, OpsDrawingFromACapturingGeneratorReadTheBaseWhenTheKernelRuns) {
  Generator eager(kSeed), captured(kSeed);
  Tensor base = zeros({2}, {.dtype = DType::Int64});
  captured.begin_capture(Device::cpu(), static_cast<const uint64_t*>(base.data_ptr()));
  const std::array<uint64_t, 2> words = {kSeed, 0};
  write_words_(base, words);
  const Draws during = draw_step(captured);  // the CPU kernel reads the base now
  captured.end_capture();
  const Draws expected = draw_step(eager);
  EXPECT_TRUE(all_equal(during.uniform, expected.uniform));
  EXPECT_TRUE(all_equal(during.mask, expected.mask));
  EXPECT_TRUE(all_equal(during.noise, expected.noise));
}

// A graph captures its own thread's work: another thread drawing from the same generator
// meanwhile draws eagerly (its numbers come from the generator's own offset, which the
// replays' advance() then continues from), not from the capture's base.
TEST(PhiloxCapture, OtherThreadsDrawEagerlyDuringACapture) {
  Generator g(kSeed), eager(kSeed);
  const Tensor base = zeros({2}, {.dtype = DType::Int64});
  g.begin_capture(Device::cpu(), static_cast<const uint64_t*>(base.data_ptr()));
  g.reserve(8);
  Tensor drawn;
  PhiloxState seen{};
  bool capturing_there = true;
  std::thread([&] {
    capturing_there = g.capturing();
    seen = g.state();
    drawn = rand({6}, {}, &g);
  }).join();
  EXPECT_FALSE(capturing_there);
  EXPECT_EQ(seen.base, nullptr);
  EXPECT_TRUE(all_equal(drawn, rand({6}, {}, &eager)));
  EXPECT_TRUE(g.capturing());
  EXPECT_EQ(g.end_capture(), 4u) << "the other thread's blocks are not the capture's";
  EXPECT_EQ(g.offset(), 3u);
}

TEST(PhiloxCapture, StateAndSetStateRewindWithinTheCaptureAsCheckpointingDoes) {
  Generator g(kSeed);
  const Tensor base = zeros({2}, {.dtype = DType::Int64});
  const auto* words = static_cast<const uint64_t*>(base.data_ptr());
  g.begin_capture(Device::cpu(), words);
  g.reserve(4);
  const PhiloxState at_forward = g.state();
  EXPECT_EQ(at_forward.base, words);
  EXPECT_EQ(at_forward.offset, 2u);
  const PhiloxState first = g.reserve(6);
  g.set_state(at_forward);  // the recompute draws the forward's numbers again
  const PhiloxState again = g.reserve(6);
  EXPECT_EQ(again.offset, first.offset);
  EXPECT_EQ(again.base, first.base);
  EXPECT_KILN_ERROR(g.set_state(PhiloxState{kSeed, 0, nullptr}), "set_state", "capture");
  EXPECT_EQ(g.end_capture(), 5u);
  EXPECT_KILN_ERROR(g.set_state(at_forward), "set_state", "capture that has ended");
}

TEST(PhiloxCapture, MisusesAreNamedErrors) {
  Generator g(kSeed);
  const Tensor base = zeros({2}, {.dtype = DType::Int64});
  const auto* words = static_cast<const uint64_t*>(base.data_ptr());
  EXPECT_KILN_ERROR(g.end_capture(), "end_capture without begin_capture");
  EXPECT_KILN_ERROR(g.begin_capture(Device::cpu(), nullptr), "begin_capture", "no base");
  g.begin_capture(Device::cuda(0), words);
  EXPECT_KILN_ERROR(g.begin_capture(Device::cpu(), words), "already draws for a capture");
  EXPECT_KILN_ERROR(g.manual_seed(1), "manual_seed", "being captured");
  EXPECT_KILN_ERROR(g.advance(3), "advance", "not during a capture");
  // A CPU op may not draw from a generator whose states point into a GPU's memory.
  EXPECT_KILN_ERROR(rand({4}, {}, &g), "rand", "captured on cuda:0", "cannot serve cpu");
  EXPECT_KILN_ERROR(bernoulli({4}, 0.5, {}, &g), "bernoulli", "captured on cuda:0");
  EXPECT_KILN_ERROR(dropout(ones({4}), 0.5, true, &g), "bernoulli", "captured on cuda:0");
  g.end_capture();
  EXPECT_EQ(g.offset(), 0u) << "refused draws reserve nothing";
}

TEST(PhiloxCapture, CpuOpsOnACapturingThreadStillDrawEagerly) {
  // A CPU op in a captured body runs at once (only GPU work is recorded), so it may draw
  // from a generator that is not capturing.
  const CaptureOnThisThread capturing;
  Generator a(kSeed), b(kSeed);
  const Tensor x = rand({6}, {}, &a);
  EXPECT_TRUE(all_equal(x, rand({6}, {}, &b)));
  EXPECT_EQ(a.offset(), 3u);
}

TEST(DeviceValues, WriteWordsAndDoublesStoreExactlyTheGivenBits) {
  const Tensor words = empty({3}, {.dtype = DType::Int64});
  const std::array<uint64_t, 3> w = {0, 0xFFFFFFFFFFFFFFFFull, 123456789012345ull};
  write_words_(words, w);
  EXPECT_EQ(words.to_vector<int64_t>(), (std::vector<int64_t>{0, -1, 123456789012345}));
  const Tensor doubles = empty({2}, {.dtype = DType::Float64});
  const std::array<double, 2> d = {0.1, -3.5e-300};
  write_doubles_(doubles, d);
  EXPECT_EQ(doubles.to_vector<double>(), (std::vector<double>{0.1, -3.5e-300}));
}

TEST(DeviceValues, BadTargetsAreNamedErrors) {
  const std::array<uint64_t, 2> two = {1, 2};
  EXPECT_KILN_ERROR(write_words_(Tensor(), two), "write_words_", "undefined");
  EXPECT_KILN_ERROR(write_words_(empty({2}, {.dtype = DType::Float32}), two), "write_words_", "8-byte",
                    "float32");
  EXPECT_KILN_ERROR(write_words_(empty({3}, {.dtype = DType::Int64}), two),
                    "2 words for a tensor of 3 elements");
  EXPECT_KILN_ERROR(write_words_(empty({2, 2}, {.dtype = DType::Int64}).select(1, 0), two), "not contiguous");
  std::vector<uint64_t> many(kMaxWrittenWords + 1, 7);
  EXPECT_KILN_ERROR(write_words_(empty({kMaxWrittenWords + 1}, {.dtype = DType::Int64}), many),
                    "at most 16 words");
  const std::array<double, 2> values = {1.0, 2.0};
  EXPECT_KILN_ERROR(write_doubles_(empty({2}, {.dtype = DType::Int64}), values), "write_doubles_", "float64");
}

}  // namespace
}  // namespace kiln
