// The cuDNN conv algorithm cache without a GPU (kernels/cuda/cudnn/conv_algorithm_cache.h):
// a fake cuDNN and a fake allocator (conv_algorithm_fakes.h), so every rule of Note
// [Choosing a conv algorithm] and Note [Usable algorithms] is checked exactly.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"
#include "tests/cuda/host/conv_algorithm_fakes.h"
#include "tests/test_util.h"

namespace kiln::cuda {
namespace {

using testing::algorithm;
using testing::base_key;
using testing::FakeSource;
using testing::FakeWorkspaceMemory;
using testing::kMiB;

// ---- keys -------------------------------------------------------------------------------

TEST(ConvAlgorithmCache, EveryKeyFieldChangesTheKeyAndItsHash) {
  const std::vector<std::pair<const char*, std::function<void(ConvKey&)>>> changes = {
      {"pass", [](ConvKey& k) { k.pass = ConvPass::BackwardData; }},
      {"pass", [](ConvKey& k) { k.pass = ConvPass::BackwardFilter; }},
      {"device", [](ConvKey& k) { k.device = 1; }},
      {"dtype", [](ConvKey& k) { k.dtype = DType::Float16; }},
      {"math", [](ConvKey& k) { k.math = ConvMath::Default; }},
      {"deterministic", [](ConvKey& k) { k.deterministic = true; }},
      {"groups", [](ConvKey& k) { k.groups = 2; }},
      {"input size", [](ConvKey& k) { k.input_sizes[0] = 4; }},
      {"input rank", [](ConvKey& k) { k.input_sizes.push_back(1); }},
      {"input strides", [](ConvKey& k) { k.input_strides = {1404928, 1, 50176, 1792, 64}; }},
      {"weight", [](ConvKey& k) { k.weight_sizes[2] = 1; }},
      {"stride", [](ConvKey& k) { k.stride[1] = 2; }},
      {"padding", [](ConvKey& k) { k.padding[2] = 0; }},
      {"dilation", [](ConvKey& k) { k.dilation[0] = 2; }},
  };
  const ConvKey base = base_key();
  EXPECT_EQ(base, base_key());
  EXPECT_EQ(ConvKeyHash{}(base), ConvKeyHash{}(base_key()));
  for (const auto& [field, change] : changes) {
    ConvKey changed = base_key();
    change(changed);
    EXPECT_NE(changed, base) << field;
    EXPECT_NE(ConvKeyHash{}(changed), ConvKeyHash{}(base)) << field;
  }
}

TEST(ConvAlgorithmCache, ListsThatSplitDifferentlyHashDifferently) {
  ConvKey a = base_key(), b = base_key();
  a.stride = {1, 1};
  a.padding = {1, 1, 1, 1};
  b.stride = {1, 1, 1};
  b.padding = {1, 1, 1};
  EXPECT_NE(ConvKeyHash{}(a), ConvKeyHash{}(b));
}

// ---- lookups, searches and hits ---------------------------------------------------------

TEST(ConvAlgorithmCache, HeuristicsAreAskedOnceThenTheCacheAnswers) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = {algorithm(3, 0), algorithm(1, 0)};
  for (int call = 0; call < 3; ++call) {
    const ConvAlgorithmCache::Choice choice = cache.choose(base_key(), /*benchmark=*/false, source, memory);
    EXPECT_EQ(choice.algorithm.algo, 3);
  }
  EXPECT_EQ(source.heuristic_calls, 1);
  EXPECT_EQ(source.search_calls, 0);
  const cudnn::Stats stats = cache.stats();
  EXPECT_EQ(stats.forward.heuristic_lookups, 1);
  EXPECT_EQ(stats.forward.hits, 2);
  EXPECT_EQ(stats.forward.finds, 0);
  EXPECT_EQ(stats.backward_data.hits + stats.backward_filter.hits, 0);
}

TEST(ConvAlgorithmCache, BenchmarkModeSearchesOncePerKeyAndReusesTheWinner) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.timed = {algorithm(5, 0), algorithm(0, 0)};
  EXPECT_EQ(cache.choose(base_key(), true, source, memory).algorithm.algo, 5);
  source.timed = {algorithm(0, 0)};  // a second search would now pick 0: it must not run
  EXPECT_EQ(cache.choose(base_key(), true, source, memory).algorithm.algo, 5);
  EXPECT_EQ(source.search_calls, 1);

  ConvKey other = base_key();
  other.input_sizes[0] = 4;
  EXPECT_EQ(cache.choose(other, true, source, memory).algorithm.algo, 0);
  EXPECT_EQ(source.search_calls, 2);
  EXPECT_EQ(cache.stats().forward.finds, 2);
  EXPECT_EQ(cache.stats().forward.hits, 1);
}

TEST(ConvAlgorithmCache, CountersArePerPass) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = source.timed = {algorithm(1, 0)};
  ConvKey data = base_key(), filter = base_key();
  data.pass = ConvPass::BackwardData;
  filter.pass = ConvPass::BackwardFilter;
  cache.choose(data, true, source, memory);
  cache.choose(data, true, source, memory);
  cache.choose(filter, false, source, memory);
  const cudnn::Stats stats = cache.stats();
  EXPECT_EQ(stats.backward_data.finds, 1);
  EXPECT_EQ(stats.backward_data.hits, 1);
  EXPECT_EQ(stats.backward_filter.heuristic_lookups, 1);
  EXPECT_EQ(stats.forward.finds + stats.forward.hits + stats.forward.heuristic_lookups, 0);
  cache.reset_stats();
  EXPECT_EQ(cache.stats().backward_data.finds, 0);
  EXPECT_EQ(cache.size(), 2u);  // resetting counters keeps the entries
}

TEST(ConvAlgorithmCache, BenchmarkModeReplacesAHeuristicEntryButNotTheOtherWayRound) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = {algorithm(1, 0)};
  source.timed = {algorithm(2, 0)};
  EXPECT_EQ(cache.choose(base_key(), false, source, memory).algorithm.algo, 1);
  EXPECT_EQ(cache.choose(base_key(), true, source, memory).algorithm.algo, 2);  // searched now
  EXPECT_EQ(cache.choose(base_key(), false, source, memory).algorithm.algo, 2);  // a hit: searched beats heuristics
  EXPECT_EQ(source.search_calls, 1);
  EXPECT_EQ(source.heuristic_calls, 1);
  EXPECT_EQ(cache.stats().forward.hits, 1);
}

TEST(ConvAlgorithmCache, ClearForgetsEveryChoice) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.timed = {algorithm(1, 0)};
  cache.choose(base_key(), true, source, memory);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  cache.choose(base_key(), true, source, memory);
  EXPECT_EQ(source.search_calls, 2);
}

// ---- workspace limits -------------------------------------------------------------------

TEST(ConvAlgorithmCache, AlgorithmsWhoseWorkspaceCannotBeAllocatedAreSkipped) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  memory.limit = 100 * kMiB;
  source.ranked = {algorithm(7, 8192 * kMiB), algorithm(6, 200 * kMiB), algorithm(2, 64 * kMiB), algorithm(0, 0)};
  {
    const ConvAlgorithmCache::Choice choice = cache.choose(base_key(), false, source, memory);
    EXPECT_EQ(choice.algorithm.algo, 2);
    EXPECT_EQ(choice.workspace.bytes(), 64 * kMiB);
    EXPECT_NE(choice.workspace.data(), nullptr);
    EXPECT_EQ(memory.live.size(), 1u);
  }
  EXPECT_TRUE(memory.live.empty()) << "the workspace is given back when the choice goes";
  // Memory gets tighter later: the cached ranking falls through to the next algorithm.
  memory.limit = 0;
  const ConvAlgorithmCache::Choice choice = cache.choose(base_key(), false, source, memory);
  EXPECT_EQ(choice.algorithm.algo, 0);
  EXPECT_EQ(choice.workspace.data(), nullptr);
  EXPECT_EQ(source.heuristic_calls, 1);
}

TEST(ConvAlgorithmCache, NoAlgorithmThatFitsIsAClearErrorNotAnOutOfMemory) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  memory.limit = kMiB;
  source.ranked = {algorithm(1, 512 * kMiB), algorithm(4, 16 * kMiB)};
  EXPECT_KILN_ERROR(cache.choose(base_key(), false, source, memory), "needs more workspace than can be allocated",
                    std::to_string(16 * kMiB), "[8, 64, 28, 28, 28]");
  EXPECT_TRUE(memory.live.empty());
}

TEST(ConvAlgorithmCache, TheSearchGetsTheLargestWorkspaceThatCanBeAllocated) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.max_workspace = 1024 * kMiB;
  memory.limit = 300 * kMiB;
  // The 512 MiB algorithm cannot have been timed with 256 MiB: it is dropped.
  source.timed = {algorithm(9, 512 * kMiB), algorithm(3, 256 * kMiB), algorithm(0, 0)};
  const ConvAlgorithmCache::Choice choice = cache.choose(base_key(), true, source, memory);
  EXPECT_EQ(source.last_search_workspace, 256 * kMiB);
  EXPECT_NE(source.last_search_ptr, nullptr);
  EXPECT_EQ((std::vector<size_t>{1024 * kMiB, 512 * kMiB, 256 * kMiB, 256 * kMiB}), memory.attempts);
  EXPECT_EQ(choice.algorithm.algo, 3);
  const auto entries = cache.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].second.ranking, (std::vector<ConvAlgorithm>{algorithm(3, 256 * kMiB), algorithm(0, 0)}));
}

TEST(ConvAlgorithmCache, ASearchWantingLessThanTheFloorGetsWhatItWants) {
  FakeWorkspaceMemory memory;
  const Workspace small = largest_workspace(memory, 256 * 1024);
  EXPECT_EQ(small.bytes(), 256u * 1024);
  EXPECT_NE(small.data(), nullptr);
  memory.limit = 0;
  const Workspace none = largest_workspace(memory, 256 * 1024);
  EXPECT_EQ(none.bytes(), 0u);
  EXPECT_EQ(memory.attempts, (std::vector<size_t>{256 * 1024, 256 * 1024}));  // tried once, not halved below the floor
  EXPECT_EQ(largest_workspace(memory, 0).bytes(), 0u);
}

TEST(ConvAlgorithmCache, ASearchWithNoMemoryToSpareRunsWithoutWorkspace) {
  FakeWorkspaceMemory memory;
  memory.limit = 0;
  const Workspace workspace = largest_workspace(memory, 64 * kMiB);
  EXPECT_EQ(workspace.bytes(), 0u);
  EXPECT_EQ(workspace.data(), nullptr);
  EXPECT_EQ(memory.attempts.back(), kMinSearchWorkspace);  // halved down to the floor, not below
}

// ---- usable algorithms ------------------------------------------------------------------

TEST(ConvAlgorithmCache, DeterministicModeKeepsOnlyDeterministicAlgorithms) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  ConvKey key = base_key();
  key.pass = ConvPass::BackwardFilter;
  key.deterministic = true;
  source.ranked = {algorithm(3, 0, /*deterministic=*/false), algorithm(1, 0, true)};
  EXPECT_EQ(cache.choose(key, false, source, memory).algorithm.algo, 1);
  key.deterministic = false;
  EXPECT_EQ(cache.choose(key, false, source, memory).algorithm.algo, 3);

  key.input_sizes[0] = 2;
  key.deterministic = true;
  source.ranked = {algorithm(3, 0, false)};
  EXPECT_KILN_ERROR(cache.choose(key, false, source, memory), "no usable algorithm", "deterministic mode");
}

TEST(ConvAlgorithmCache, WithoutTf32EveryAlgorithmRunsInFmaMath) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = {algorithm(2, 0, true, ConvMath::TensorOp), algorithm(1, 0, true, ConvMath::Default),
                   algorithm(4, 0, true, ConvMath::TensorOpAllowConversion)};
  ConvKey key = base_key();  // float32, math Fma: TF32 not allowed
  const ConvAlgorithmCache::Choice choice = cache.choose(key, false, source, memory);
  EXPECT_EQ(choice.algorithm.algo, 1);  // the tensor-op-only algorithms are dropped, not forced
  EXPECT_EQ(choice.algorithm.math, ConvMath::Fma);
  const auto entries = cache.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].second.ranking, (std::vector<ConvAlgorithm>{algorithm(1, 0, true, ConvMath::Fma)}));
  key.math = ConvMath::Default;  // TF32 allowed: cuDNN's math stands
  const ConvAlgorithmCache::Choice tf32 = cache.choose(key, false, source, memory);
  EXPECT_EQ(tf32.algorithm.algo, 2);
  EXPECT_EQ(tf32.algorithm.math, ConvMath::TensorOp);
}

TEST(ConvAlgorithmCache, WithoutTf32OnlyTensorOpAlgorithmsIsAClearError) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = {algorithm(2, 0, true, ConvMath::TensorOp)};
  EXPECT_KILN_ERROR(cache.choose(base_key(), false, source, memory), "conv: cuDNN offers no usable algorithm");
}

// A heuristic ranking finished after another thread's search of the same key must not
// replace the searched entry (rank runs without the lock).
TEST(ConvAlgorithmCache, AHeuristicRankingFinishingLastKeepsTheSearchedEntry) {
  ConvAlgorithmCache cache;
  FakeWorkspaceMemory memory;
  class RacingSource final : public ConvAlgorithmSource {
   public:
    explicit RacingSource(ConvAlgorithmCache& cache) : cache_(cache) {}
    std::vector<ConvAlgorithm> heuristics(const ConvKey& key) override {
      // Meanwhile, "another thread" searches the key and caches the winner.
      cache_.insert(key, {.ranking = {algorithm(7, 0)}, .searched = true});
      return {algorithm(1, 0)};
    }
    size_t max_workspace_bytes(const ConvKey&) override { return 0; }
    std::vector<ConvAlgorithm> search(const ConvKey&, void*, size_t) override { return {}; }

   private:
    ConvAlgorithmCache& cache_;
  };
  RacingSource source(cache);
  EXPECT_EQ(cache.choose(base_key(), false, source, memory).algorithm.algo, 1);  // its own ranking runs now
  const auto entries = cache.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].second.searched);
  EXPECT_EQ(entries[0].second.ranking, (std::vector<ConvAlgorithm>{algorithm(7, 0)}));
}

TEST(ConvAlgorithmCache, UsabilityRules) {
  ConvKey key = base_key();
  EXPECT_TRUE(usable(key, algorithm(1, 10, false), SIZE_MAX));
  EXPECT_FALSE(usable(key, algorithm(1, 10, true), 9));
  EXPECT_TRUE(usable(key, algorithm(1, 10, true), 10));
  key.deterministic = true;
  EXPECT_FALSE(usable(key, algorithm(1, 0, false), SIZE_MAX));
  EXPECT_TRUE(usable(key, algorithm(1, 0, true), SIZE_MAX));
  EXPECT_FALSE(usable(key, algorithm(1, 0, true, ConvMath::TensorOp), SIZE_MAX));  // key math Fma
  EXPECT_TRUE(usable(key, algorithm(1, 0, true, ConvMath::Default), SIZE_MAX));
  key.math = ConvMath::TensorOp;
  EXPECT_TRUE(usable(key, algorithm(1, 0, true, ConvMath::TensorOp), SIZE_MAX));
}

// Algorithm numbers are cuDNN's enum values for the pass: 0..7 forward, 0..5 backward
// data, 0..6 backward filter; anything else is refused, whoever offers it.
TEST(ConvAlgorithmCache, OnlyAlgorithmNumbersCudnnDefinesForThePassAreUsable) {
  const std::pair<ConvPass, int> counts[] = {
      {ConvPass::Forward, 8}, {ConvPass::BackwardData, 6}, {ConvPass::BackwardFilter, 7}};
  for (const auto& [pass, count] : counts) {
    ConvKey key = base_key();
    key.pass = pass;
    EXPECT_EQ(kConvAlgorithmCount[static_cast<int>(pass)], count);
    EXPECT_TRUE(usable(key, algorithm(0, 0), SIZE_MAX)) << conv_pass_name(pass);
    EXPECT_TRUE(usable(key, algorithm(count - 1, 0), SIZE_MAX)) << conv_pass_name(pass);
    EXPECT_FALSE(usable(key, algorithm(count, 0), SIZE_MAX)) << conv_pass_name(pass);
    EXPECT_FALSE(usable(key, algorithm(-1, 0), SIZE_MAX)) << conv_pass_name(pass);
  }
}

TEST(ConvAlgorithmCache, EachRefusalSaysWhy) {
  ConvKey key = base_key();
  key.deterministic = true;
  const std::pair<ConvAlgorithm, const char*> cases[] = {
      {algorithm(8, 0), "not an algorithm cuDNN defines for this pass"},
      {algorithm(1, 0, /*deterministic=*/false), "not deterministic, but the key is in deterministic mode"},
      {algorithm(1, 0, true, ConvMath::TensorOpAllowConversion), "a tensor-op math algorithm, but the key's math is fma"},
      {algorithm(1, 2 * kMiB), "its workspace is larger than the search's"},
  };
  for (const auto& [refused, why] : cases) {
    const char* said = why_unusable(key, refused, kMiB);
    ASSERT_NE(said, nullptr) << why;
    EXPECT_NE(std::string(said).find(why), std::string::npos) << said;
  }
  EXPECT_EQ(why_unusable(key, algorithm(1, kMiB), kMiB), nullptr);
}

// The one filter every ranking passes (a search's, heuristics', a loaded one): the usable
// algorithms in order, each as it runs, and each refused one with its reason.
TEST(ConvAlgorithmCache, UsableRankingKeepsTheOrderAndListsTheRefused) {
  ConvKey key = base_key();  // math Fma
  std::vector<RefusedAlgorithm> refused;
  const std::vector<ConvAlgorithm> kept = usable_ranking(
      key, {algorithm(2, 0, true, ConvMath::TensorOp), algorithm(5, 0, true, ConvMath::Default), algorithm(9, 0),
            algorithm(0, 0)},
      SIZE_MAX, &refused);
  EXPECT_EQ(kept, (std::vector<ConvAlgorithm>{algorithm(5, 0), algorithm(0, 0)}));  // default math runs as FMA
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].algorithm.algo, 2);
  EXPECT_EQ(refused[1].algorithm.algo, 9);
  EXPECT_EQ(usable_ranking(key, {algorithm(3, 0)}, SIZE_MAX), (std::vector<ConvAlgorithm>{algorithm(3, 0)}));
}

TEST(ConvAlgorithmCache, ASearchDropsAnAlgorithmNumberCudnnDoesNotDefine) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.timed = {algorithm(11, 0), algorithm(4, 0)};
  EXPECT_EQ(cache.choose(base_key(), true, source, memory).algorithm.algo, 4);
}

// ---- calls and fastest times (Note [A step's speed of light] in core/cudnn.h) -----------

ConvAlgorithm timed_at(ConvAlgorithm a, float ms) {
  a.time_ms = ms;
  return a;
}

TEST(ConvAlgorithmUses, EveryChoiceCountsAsACallOfItsKeyUntilTheStatsAreReset) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = source.timed = {algorithm(1, 0)};
  ConvKey other = base_key();
  other.pass = ConvPass::BackwardFilter;
  for (int call = 0; call < 3; ++call) cache.choose(base_key(), /*benchmark=*/true, source, memory);  // a miss, 2 hits
  cache.choose(other, /*benchmark=*/false, source, memory);
  std::vector<cudnn::ConvUse> uses = conv_uses_of(cache.entries());
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].key, describe(other));  // "backward_filter ..." sorts before "forward ..."
  EXPECT_EQ(uses[0].calls, 1);
  EXPECT_EQ(uses[1].key, describe(base_key()));
  EXPECT_EQ(uses[1].calls, 3);

  cache.reset_stats();
  cache.choose(base_key(), true, source, memory);
  uses = conv_uses_of(cache.entries());
  ASSERT_EQ(uses.size(), 2u);  // a reset keeps the entries
  EXPECT_EQ(uses[0].calls, 0);
  EXPECT_EQ(uses[1].calls, 1);
}

TEST(ConvAlgorithmUses, ASearchThatReplacesHeuristicsKeepsTheKeysCalls) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = {algorithm(1, 0)};
  source.timed = {timed_at(algorithm(2, 0), 0.25f)};
  cache.choose(base_key(), /*benchmark=*/false, source, memory);
  cache.choose(base_key(), /*benchmark=*/true, source, memory);  // replaces the heuristic entry
  const std::vector<cudnn::ConvUse> uses = conv_uses_of(cache.entries());
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].calls, 2);
  EXPECT_FLOAT_EQ(uses[0].fastest_ms, 0.25);
}

TEST(ConvAlgorithmUses, TheFastestTimeIsTheLeastAmongUsableAlgorithms) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  ConvKey key = base_key();
  key.deterministic = true;
  // The fastest one is not deterministic, so the key may not run it: its time is no bound.
  source.timed = {timed_at(algorithm(5, 0, /*deterministic=*/false), 0.5f), timed_at(algorithm(0, 0), 1.5f),
                  timed_at(algorithm(2, 0), 1.25f)};
  cache.choose(key, /*benchmark=*/true, source, memory);
  const std::vector<cudnn::ConvUse> uses = conv_uses_of(cache.entries());
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_FLOAT_EQ(uses[0].fastest_ms, 1.25);
}

TEST(ConvAlgorithmUses, HeuristicRankingsHaveNoFastestTime) {
  ConvAlgorithmCache cache;
  FakeSource source;
  FakeWorkspaceMemory memory;
  source.ranked = {algorithm(1, 0)};
  cache.choose(base_key(), /*benchmark=*/false, source, memory);
  const std::vector<cudnn::ConvUse> uses = conv_uses_of(cache.entries());
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_LT(uses[0].fastest_ms, 0);
}

TEST(ConvAlgorithmUses, ATimeIsAMeasurementNotPartOfWhatAnAlgorithmIs) {
  EXPECT_EQ(timed_at(algorithm(3, 64), 1.0f), algorithm(3, 64));
  EXPECT_NE(algorithm(3, 64), algorithm(3, 128));
}

}  // namespace
}  // namespace kiln::cuda
