// The cuDNN conv algorithm cache without a GPU (kernels/cuda/cudnn/conv_algorithm_cache.h,
// conv_algorithm_file.h): a fake cuDNN (FakeSource) ranks and "times" made-up algorithms
// and a fake allocator (FakeWorkspaceMemory) refuses requests above a limit, so every rule
// of Note [Choosing a conv algorithm] and Note [Usable algorithms] is checked exactly, as
// are the file's round trip, its identity check and its errors for corrupt input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"
#include "kernels/cuda/cudnn/conv_algorithm_file.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

ConvKey base_key() {
  return {.pass = ConvPass::Forward,
          .device = 0,
          .dtype = DType::Float32,
          .math = ConvMath::Fma,
          .deterministic = false,
          .groups = 1,
          .input_sizes = {8, 64, 28, 28, 28},
          .input_strides = {1404928, 21952, 784, 28, 1},
          .weight_sizes = {64, 64, 3, 3, 3},
          .stride = {1, 1, 1},
          .padding = {1, 1, 1},
          .dilation = {1, 1, 1}};
}

ConvAlgorithm algorithm(int algo, size_t workspace, bool deterministic = true, ConvMath math = ConvMath::Fma) {
  return {.algo = algo, .math = math, .workspace_bytes = workspace, .deterministic = deterministic};
}

// cuDNN as the cache sees it: fixed rankings, and a record of what was asked.
class FakeSource final : public ConvAlgorithmSource {
 public:
  std::vector<ConvAlgorithm> ranked;  // what heuristics() returns
  std::vector<ConvAlgorithm> timed;   // what search() returns, fastest first
  size_t max_workspace = 0;
  int heuristic_calls = 0;
  int search_calls = 0;
  size_t last_search_workspace = 0;
  void* last_search_ptr = nullptr;

  std::vector<ConvAlgorithm> heuristics(const ConvKey&) override {
    ++heuristic_calls;
    return ranked;
  }
  size_t max_workspace_bytes(const ConvKey&) override { return max_workspace; }
  std::vector<ConvAlgorithm> search(const ConvKey&, void* workspace, size_t bytes) override {
    ++search_calls;
    last_search_workspace = bytes;
    last_search_ptr = workspace;
    return timed;
  }
};

// An allocator that refuses requests above `limit`; addresses are made up.
class FakeWorkspaceMemory final : public WorkspaceMemory {
 public:
  size_t limit = size_t{1} << 40;
  std::vector<size_t> attempts;      // every request, in order
  std::map<void*, size_t> live;      // handed out and not freed

  void* try_allocate(size_t nbytes) override {
    attempts.push_back(nbytes);
    if (nbytes > limit) return nullptr;
    void* ptr = reinterpret_cast<void*>(next_);
    next_ += nbytes + 256;
    live[ptr] = nbytes;
    return ptr;
  }
  void free(void* ptr) override {
    ASSERT_EQ(live.erase(ptr), 1u) << "freed a workspace that was not handed out";
  }

 private:
  std::uintptr_t next_ = 0x10000;
};

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
  try {
    cache.choose(base_key(), false, source, memory);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("needs more workspace than can be allocated"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(16 * kMiB)), std::string::npos) << message;
    EXPECT_NE(message.find("[8, 64, 28, 28, 28]"), std::string::npos) << message;
  }
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
  try {
    cache.choose(key, false, source, memory);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deterministic mode"), std::string::npos) << e.what();
  }
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
  EXPECT_THROW(cache.choose(base_key(), false, source, memory), Error);
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

// ---- the file ---------------------------------------------------------------------------

class ConvAlgorithmFile : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() /
              ("kiln_algos_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  std::string path(const std::string& name = "algos.txt") const { return (folder_ / name).string(); }

  void write_text(const std::string& text) const { std::ofstream(path(), std::ios::binary) << text; }

  // One entry per pass, as a cache lists them for saving.
  std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>> saved_entries() const {
    ConvAlgorithmCache cache;
    ConvKey key = base_key();
    cache.insert(key, {.ranking = {algorithm(1, 3 * kMiB, true), algorithm(0, 0, false)}, .searched = true});
    key.pass = ConvPass::BackwardData;
    key.dtype = DType::BFloat16;
    key.math = ConvMath::TensorOp;
    cache.insert(key, {.ranking = {algorithm(4, 0, true, ConvMath::Default)}, .searched = false});
    key.pass = ConvPass::BackwardFilter;
    key.deterministic = true;
    key.input_sizes = {1, 3, 17};  // a 1-d conv keeps its rank
    key.input_strides = {51, 17, 1};
    key.weight_sizes = {6, 3, 5};
    key.stride = {2};
    key.padding = {0};
    key.dilation = {3};
    key.groups = 1;
    cache.insert(key, {.ranking = {algorithm(5, 7, true, ConvMath::TensorOpAllowConversion)}, .searched = true});
    return cache.entries();
  }

  // The error load gives for a file holding `text`, or "" when it loads.
  std::string load_error(const std::string& text) const {
    write_text(text);
    ConvAlgorithmCache cache;
    try {
      read_algorithm_file(cache, path(), kIdentity);
    } catch (const Error& e) {
      EXPECT_EQ(cache.size(), 0u) << "a bad file must leave the cache as it was";
      return e.what();
    }
    return "";
  }

  // A valid file's text with line `index` (0-based) replaced by `line`.
  std::string with_line(size_t index, const std::string& line) const {
    std::vector<std::string> lines = valid_lines();
    lines.at(index) = line;
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    return text;
  }

  std::vector<std::string> valid_lines() const {
    write_algorithm_file(saved_entries(), path("valid.txt"), kIdentity);
    std::ifstream in(path("valid.txt"));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  const AlgorithmCacheIdentity kIdentity{.gpu = "NVIDIA H200", .cudnn_version = 91900};
  std::filesystem::path folder_;
};

TEST_F(ConvAlgorithmFile, RoundTripRestoresEveryEntry) {
  const auto original = saved_entries();
  EXPECT_EQ(write_algorithm_file(original, path(), kIdentity), 3);
  ConvAlgorithmCache loaded;
  const cudnn::LoadReport report = read_algorithm_file(loaded, path(), kIdentity);
  EXPECT_TRUE(report.loaded) << report.message;
  EXPECT_EQ(report.entries, 3);
  ASSERT_EQ(loaded.size(), 3u);
  for (const auto& [key, entry] : original) {
    bool found = false;
    for (const auto& [loaded_key, loaded_entry] : loaded.entries()) {
      if (loaded_key == key) {
        found = true;
        EXPECT_EQ(loaded_entry.ranking, entry.ranking) << describe(key);
        EXPECT_EQ(loaded_entry.searched, entry.searched) << describe(key);
      }
    }
    EXPECT_TRUE(found) << describe(key);
  }
  // No temporary file is left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& item : std::filesystem::directory_iterator(folder_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(ConvAlgorithmFile, ALoadedSearchIsAHitInBenchmarkMode) {
  write_algorithm_file(saved_entries(), path(), kIdentity);
  ConvAlgorithmCache cache;
  read_algorithm_file(cache, path(), kIdentity);
  FakeSource source;
  FakeWorkspaceMemory memory;
  EXPECT_EQ(cache.choose(base_key(), true, source, memory).algorithm.algo, 1);
  EXPECT_EQ(source.search_calls, 0);
  EXPECT_EQ(cache.stats().forward.hits, 1);
  EXPECT_EQ(cache.stats().forward.finds, 0);
}

TEST_F(ConvAlgorithmFile, AnotherGpuOrCudnnLoadsNothingAndSaysWhy) {
  write_algorithm_file(saved_entries(), path(), kIdentity);
  for (const AlgorithmCacheIdentity& other : {AlgorithmCacheIdentity{.gpu = "NVIDIA A100-SXM4-80GB", .cudnn_version = 91900},
                                              AlgorithmCacheIdentity{.gpu = "NVIDIA H200", .cudnn_version = 90100}}) {
    ConvAlgorithmCache cache;
    const cudnn::LoadReport report = read_algorithm_file(cache, path(), other);
    EXPECT_FALSE(report.loaded);
    EXPECT_EQ(report.entries, 0);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_NE(report.message.find("nothing loaded"), std::string::npos) << report.message;
    EXPECT_NE(report.message.find(other.gpu), std::string::npos) << report.message;
    EXPECT_NE(report.message.find(std::to_string(other.cudnn_version)), std::string::npos) << report.message;
  }
}

TEST_F(ConvAlgorithmFile, SavingIntoAMissingFolderNamesThePath) {
  const std::string bad = path("no_such_folder/algos.txt");
  try {
    write_algorithm_file({}, bad, kIdentity);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_folder"), std::string::npos) << e.what();
  }
}

TEST_F(ConvAlgorithmFile, SavingReplacesTheOldFileWhole) {
  write_algorithm_file(saved_entries(), path(), kIdentity);
  write_algorithm_file({}, path(), kIdentity);
  ConvAlgorithmCache cache;
  EXPECT_EQ(read_algorithm_file(cache, path(), kIdentity).entries, 0);
}

TEST_F(ConvAlgorithmFile, CorruptAndTruncatedFilesAreClearErrors) {
  const std::vector<std::string> lines = valid_lines();
  std::string whole;
  for (const std::string& l : lines) whole += l + "\n";
  ASSERT_TRUE(load_error(whole).empty()) << load_error(whole);

  struct Case {
    const char* what;
    std::string text;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"empty", "", "is empty"},
      {"not ours", "PK\x03\x04 some zip\n", "expected the header line 'kiln-cudnn-algorithms"},
      {"future version", with_line(0, "kiln-cudnn-algorithms 7"), "format version 7"},
      {"no gpu line", with_line(1, "gpux NVIDIA"), ":2: expected the header line 'gpu"},
      {"bad cudnn version", with_line(2, "cudnn nine"), ":3: cuDNN version 'nine'"},
      {"negative count", with_line(3, "entries -1"), ":4: entry count '-1'"},
      {"cut mid-line", whole.substr(0, whole.size() - 5), "truncated: its last line has no end"},
      {"missing entries", whole.substr(0, whole.find('\n', whole.find("pass=")) + 1), "truncated: the header promises 3"},
      {"extra line", whole + "pass=forward\n", "1 lines after the 3 entries"},
      {"header only, cut", lines[0] + "\n" + lines[1] + "\n", ":3: the file is truncated"},
      {"unknown pass", with_line(4, "pass=sideways device=0"), ":5: unknown pass 'sideways'"},
      {"fields out of order", with_line(4, "device=0 pass=forward"), ":5: expected the field 'pass=...'"},
      {"bad dtype", with_line(4, lines[4].substr(0, lines[4].find("dtype=")) + "dtype=int64 math=fma"),
       "dtype 'int64' is not a floating dtype"},
      {"huge number", with_line(4, lines[4].substr(0, lines[4].find("groups=")) + "groups=99999999999999999999"),
       "groups '99999999999999999999' is not an integer"},
      {"too many dims", with_line(4, lines[4].substr(0, lines[4].find("input=")) + "input=1,2,3,4,5,6"),
       "input has more than 5 values"},
      {"dims disagree",
       with_line(4, lines[4].substr(0, lines[4].find("stride=")) + "stride=1,1 padding=1,1,1 dilation=1,1,1 searched=1 algos=0:fma:0:1"),
       "disagree on the number of dims"},
      {"bad algorithm", with_line(4, lines[4].substr(0, lines[4].find("algos=")) + "algos=1:fma:0"),
       "not algo:math:workspace:deterministic"},
      {"unknown math", with_line(4, lines[4].substr(0, lines[4].find("algos=")) + "algos=1:magic:0:1"),
       "unknown math type 'magic'"},
      {"trailing text", with_line(4, lines[4] + " extra=1"), "unexpected text after the last field"},
  };
  for (const Case& c : cases) {
    const std::string error = load_error(c.text);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.what << ": got '" << error << "'";
    if (!error.empty()) {
      EXPECT_NE(error.find(path()), std::string::npos) << c.what << ": " << error;
    }
  }
}

TEST_F(ConvAlgorithmFile, AnOversizedOrMissingFileIsRefusedBeforeReading) {
  std::ofstream(path()) << "x";
  std::filesystem::resize_file(path(), static_cast<uintmax_t>(kMaxAlgorithmFileBytes) + 1);  // sparse
  ConvAlgorithmCache cache;
  EXPECT_THROW(
      {
        try {
          read_algorithm_file(cache, path(), kIdentity);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("more than any algorithm cache"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(read_algorithm_file(cache, path("missing.txt"), kIdentity), Error);
}

}  // namespace
}  // namespace kiln::cuda
