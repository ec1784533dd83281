// The cuDNN algorithm cache file without a GPU (kernels/cuda/cudnn/conv_algorithm_file.h):
// its round trip, its identity check, its errors for corrupt input, the algorithm rules
// applied to loaded entries (Note [Algorithm cache file]), and its atomic save (Note
// [Atomic save]): concurrent saves, the mode and symlinks kept, a folder fsync failure
// reported.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"
#include "kernels/cuda/cudnn/conv_algorithm_file.h"
#include "tests/cuda/host/conv_algorithm_fakes.h"
#include "tests/test_util.h"

namespace kiln::cuda {
namespace {

using testing::algorithm;
using testing::base_key;
using testing::FakeSource;
using testing::FakeWorkspaceMemory;
using testing::kMiB;

// ---- the file ---------------------------------------------------------------------------

// A fresh empty folder per test (kiln::testing::TempFolder), removed afterwards.
class ConvAlgorithmFile : public ::testing::Test {
 protected:
  std::string path(const std::string& name = "algos.txt") const { return (folder_.path() / name).string(); }

  void write_text(const std::string& text) const { std::ofstream(path(), std::ios::binary) << text; }

  // One entry per pass, as a cache lists them for saving.
  std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>> saved_entries() const {
    ConvAlgorithmCache cache;
    ConvKey key = base_key();
    cache.insert(key, {.ranking = {algorithm(1, 3 * kMiB, true), algorithm(0, 0, false)}, .searched = true});
    key.pass = ConvPass::BackwardData;
    key.dtype = DType::BFloat16;
    key.math = ConvMath::TensorOp;
    key.channels_last_filter = true;  // a channels-last convolution's key (Note [cuDNN layouts])
    cache.insert(key, {.ranking = {algorithm(4, 0, true, ConvMath::Default)}, .searched = false});
    key.channels_last_filter = false;
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

  // Saves one entry of `key` ranking `ranking` (the writer checks no rules, so a file a
  // looser Kiln could have written is easy to make) and loads it into `cache`.
  cudnn::LoadReport load_one(ConvAlgorithmCache& cache, const ConvKey& key,
                             const std::vector<ConvAlgorithm>& ranking) const {
    write_algorithm_file({{key, {.ranking = ranking, .searched = true}}}, path(), kIdentity);
    return read_algorithm_file(cache, path(), kIdentity);
  }

  const AlgorithmCacheIdentity kIdentity{.gpu = "NVIDIA H200", .cudnn_version = 91900};
  kiln::testing::TempFolder folder_;
};

TEST_F(ConvAlgorithmFile, RoundTripRestoresEveryEntry) {
  const auto original = saved_entries();
  EXPECT_EQ(write_algorithm_file(original, path(), kIdentity).entries, 3);
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
  EXPECT_EQ(folder_.entries(), std::vector<std::string>{"algos.txt"});  // no temporary file left
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
  EXPECT_KILN_ERROR(write_algorithm_file({}, path("no_such_folder/algos.txt"), kIdentity), "no_such_folder");
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
      {"missing entries", whole.substr(0, whole.find('\n', whole.find("pass=")) + 1),
       "truncated: the header promises 3"},
      {"extra line", whole + "pass=forward\n", "1 lines after the 3 entries"},
      {"header only, cut", lines[0] + "\n" + lines[1] + "\n", ":3: the file is truncated"},
      {"unknown pass", with_line(4, "pass=sideways device=0"), ":5: unknown pass 'sideways'"},
      {"fields out of order", with_line(4, "device=0 pass=forward"), ":5: expected the field 'pass=...'"},
      {"bad dtype", with_line(4, lines[4].substr(0, lines[4].find("dtype=")) + "dtype=int64 math=fma"),
       "dtype 'int64' is not a floating dtype"},
      {"huge number",
       with_line(4, lines[4].substr(0, lines[4].find("groups=")) + "groups=99999999999999999999"),
       "groups '99999999999999999999' is not an integer"},
      {"too many dims", with_line(4, lines[4].substr(0, lines[4].find("input=")) + "input=1,2,3,4,5,6"),
       "input has more than 5 values"},
      {"dims disagree",
       with_line(4, lines[4].substr(0, lines[4].find("stride=")) +
                        "stride=1,1 padding=1,1,1 dilation=1,1,1 searched=1 algos=0:fma:0:1"),
       "disagree on the number of dims"},
      {"bad filter layout",
       with_line(4, lines[4].substr(0, lines[4].find("filter=")) +
                        lines[4].substr(lines[4].find("filter=")).replace(7, 4, "ncdhw")),
       "filter must be nchw or nhwc, got 'ncdhw'"},
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
  EXPECT_KILN_ERROR(read_algorithm_file(cache, path(), kIdentity), "more than any algorithm cache");
  EXPECT_KILN_ERROR(read_algorithm_file(cache, path("missing.txt"), kIdentity), "cannot read " + path("missing.txt"));
}

TEST_F(ConvAlgorithmFile, TheParserReadsBytesWithoutAFile) {
  write_algorithm_file(saved_entries(), path(), kIdentity);
  std::ifstream in(path(), std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ConvAlgorithmCache cache;
  const cudnn::LoadReport report = read_algorithm_bytes(cache, bytes, kIdentity, "algos in memory");
  EXPECT_EQ(report.entries, 3);
  EXPECT_NE(report.message.find("algos in memory"), std::string::npos) << report.message;
  EXPECT_KILN_ERROR(read_algorithm_bytes(cache, bytes.substr(0, bytes.size() - 1), kIdentity), "<memory> is truncated");
}

// ---- the algorithm rules on loaded entries (Note [Algorithm cache file]) ---------------------

TEST_F(ConvAlgorithmFile, ADeterministicKeyDropsAnEntryWithANonDeterministicAlgorithm) {
  ConvKey key = base_key();
  key.pass = ConvPass::BackwardFilter;
  key.deterministic = true;
  ConvAlgorithmCache cache;
  const cudnn::LoadReport report = load_one(cache, key, {algorithm(1, 0, true), algorithm(3, 0, false)});
  EXPECT_TRUE(report.loaded);
  EXPECT_EQ(report.entries, 0);
  EXPECT_EQ(cache.size(), 0u);
  ASSERT_EQ(report.dropped.size(), 1u);
  EXPECT_NE(report.dropped[0].find(path() + ":5: left out the backward_filter entry"), std::string::npos)
      << report.dropped[0];
  EXPECT_NE(report.dropped[0].find("algorithm 3 (fma) is not deterministic, but the key is in deterministic mode"),
            std::string::npos)
      << report.dropped[0];
  EXPECT_NE(report.message.find("left out 1 that the algorithm rules refuse"), std::string::npos) << report.message;
  // The same ranking in a key that is not deterministic is fine.
  key.deterministic = false;
  EXPECT_EQ(load_one(cache, key, {algorithm(1, 0, true), algorithm(3, 0, false)}).entries, 1);
}

// A tensor-op algorithm in an FMA key would run with TF32 (conv.cpp sets the algorithm's
// math), which the key promises not to use.
TEST_F(ConvAlgorithmFile, AnFmaKeyDropsAnEntryWithATensorOpAlgorithm) {
  for (const ConvMath math : {ConvMath::TensorOp, ConvMath::TensorOpAllowConversion}) {
    ConvAlgorithmCache cache;
    const cudnn::LoadReport report = load_one(cache, base_key(), {algorithm(1, 0, true, math), algorithm(0, 0)});
    EXPECT_EQ(report.entries, 0) << conv_math_name(math);
    EXPECT_EQ(cache.size(), 0u);
    ASSERT_EQ(report.dropped.size(), 1u);
    EXPECT_NE(report.dropped[0].find(std::string("algorithm 1 (") + conv_math_name(math) +
                                     ") is a tensor-op math algorithm, but the key's math is fma"),
              std::string::npos)
        << report.dropped[0];
  }
  // With TF32 allowed (key math default) the tensor-op algorithm loads as it is.
  ConvKey key = base_key();
  key.math = ConvMath::Default;
  ConvAlgorithmCache cache;
  EXPECT_EQ(load_one(cache, key, {algorithm(1, 0, true, ConvMath::TensorOp)}).entries, 1);
  EXPECT_EQ(cache.entries()[0].second.ranking[0].math, ConvMath::TensorOp);
}

// As for cuDNN's own answers (run_as), a default-math algorithm of an FMA key runs in FMA
// math: loaded, it is kept as fma, so conv.cpp cannot set the default math (TF32) for it.
TEST_F(ConvAlgorithmFile, AnFmaKeyLoadsADefaultMathAlgorithmAsFma) {
  ConvAlgorithmCache cache;
  const cudnn::LoadReport report = load_one(cache, base_key(), {algorithm(1, 0, true, ConvMath::Default)});
  EXPECT_EQ(report.entries, 1);
  EXPECT_TRUE(report.dropped.empty());
  ASSERT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.entries()[0].second.ranking, (std::vector<ConvAlgorithm>{algorithm(1, 0, true, ConvMath::Fma)}));
}

TEST_F(ConvAlgorithmFile, AlgorithmNumbersOutsideThePassRangeAreDropped) {
  const std::pair<ConvPass, int> first_unknown[] = {
      {ConvPass::Forward, 8}, {ConvPass::BackwardData, 6}, {ConvPass::BackwardFilter, 7}};
  for (const auto& [pass, algo] : first_unknown) {
    ConvKey key = base_key();
    key.pass = pass;
    ConvAlgorithmCache cache;
    EXPECT_EQ(load_one(cache, key, {algorithm(algo - 1, 0)}).entries, 1) << conv_pass_name(pass);
    for (const int bad : {algo, 63, 1000, -1}) {
      const cudnn::LoadReport report = load_one(cache, key, {algorithm(0, 0), algorithm(bad, 0)});
      EXPECT_EQ(report.entries, 0) << conv_pass_name(pass) << " " << bad;
      ASSERT_EQ(report.dropped.size(), 1u);
      EXPECT_NE(report.dropped[0].find("algorithm " + std::to_string(bad) +
                                       " (fma) is not an algorithm cuDNN defines for this pass"),
                std::string::npos)
          << report.dropped[0];
    }
  }
}

// Each bad entry is named by its line; the good ones load, in a cache used as before.
TEST_F(ConvAlgorithmFile, BadEntriesAreDroppedAndTheRestLoads) {
  std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>> entries = saved_entries();
  ConvKey bad = base_key();
  bad.input_sizes[0] = 1;
  bad.input_strides[0] = 21952 * 64;
  entries.push_back({bad, {.ranking = {algorithm(2, 0, true, ConvMath::TensorOp)}, .searched = true}});
  bad.input_sizes[0] = 2;
  entries.push_back({bad, {.ranking = {algorithm(20, 0)}, .searched = true}});
  write_algorithm_file(entries, path(), kIdentity);
  ConvAlgorithmCache cache;
  const cudnn::LoadReport report = read_algorithm_file(cache, path(), kIdentity);
  EXPECT_EQ(report.entries, 3);
  EXPECT_EQ(cache.size(), 3u);
  ASSERT_EQ(report.dropped.size(), 2u);
  EXPECT_NE(report.dropped[0].find(path() + ":8: "), std::string::npos) << report.dropped[0];
  EXPECT_NE(report.dropped[1].find(path() + ":9: "), std::string::npos) << report.dropped[1];
  FakeSource source;
  FakeWorkspaceMemory memory;
  EXPECT_EQ(cache.choose(base_key(), true, source, memory).algorithm.algo, 1);
  EXPECT_EQ(source.search_calls, 0);
  source.timed = {algorithm(0, 0)};
  EXPECT_EQ(cache.choose(bad, true, source, memory).algorithm.algo, 0);  // the dropped key is searched afresh
  EXPECT_EQ(source.search_calls, 1);
}

// ---- the atomic save (Note [Atomic save]) -----------------------------------------------------

// The temporary file was once "<path>.tmp.<pid>", opened without O_EXCL: two threads
// saving one path wrote into the same file and one rename failed.
TEST_F(ConvAlgorithmFile, TwoThreadsSavingOnePathBothSucceed) {
  const auto all = saved_entries();
  const std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>> one(all.begin(), all.begin() + 1);
  const std::vector<std::string> errors = kiln::testing::errors_of_concurrent_runs(2, [&](int thread) {
    for (int i = 0; i < 50; ++i) write_algorithm_file(thread == 0 ? all : one, path(), kIdentity);
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  ConvAlgorithmCache cache;
  const int64_t loaded = read_algorithm_file(cache, path(), kIdentity).entries;  // a whole file
  EXPECT_TRUE(loaded == 3 || loaded == 1) << loaded;
  EXPECT_EQ(folder_.entries(), std::vector<std::string>{"algos.txt"});
}

TEST_F(ConvAlgorithmFile, SavingKeepsTheModeAndTheSymlink) {
  write_algorithm_file({}, path(), kIdentity);
  ASSERT_EQ(::chmod(path().c_str(), 0600), 0);
  std::filesystem::create_symlink("algos.txt", path("link.txt"));
  write_algorithm_file(saved_entries(), path("link.txt"), kIdentity);
  EXPECT_TRUE(std::filesystem::is_symlink(path("link.txt")));
  struct stat info {};
  ASSERT_EQ(::stat(path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ConvAlgorithmCache cache;
  EXPECT_EQ(read_algorithm_file(cache, path(), kIdentity).entries, 3);
}

TEST_F(ConvAlgorithmFile, AFolderFsyncFailureIsReportedNotThrown) {
  cudnn::SaveReport report;
  {
    const ScopedAtomicFileFault fault(AtomicFileStep::SyncFolder, EIO);
    report = write_algorithm_file(saved_entries(), path(), kIdentity);
  }
  EXPECT_EQ(report.entries, 3);
  EXPECT_FALSE(report.durable);
  EXPECT_NE(report.message.find("fsync(" + folder_.path().string() + ") failed: " + std::strerror(EIO)), std::string::npos)
      << report.message;
  ConvAlgorithmCache cache;
  EXPECT_EQ(read_algorithm_file(cache, path(), kIdentity).entries, 3);  // in place all the same
  EXPECT_TRUE(write_algorithm_file(saved_entries(), path(), kIdentity).durable);
}

TEST_F(ConvAlgorithmFile, AFailedSaveLeavesTheOldFileAndNoTemporary) {
  write_algorithm_file(saved_entries(), path(), kIdentity);
  {
    const ScopedAtomicFileFault fault(AtomicFileStep::Rename, EXDEV);
    EXPECT_KILN_ERROR(write_algorithm_file({}, path(), kIdentity), "save_algorithm_cache: cannot save " + path(),
                      std::string("failed: ") + std::strerror(EXDEV));
  }
  EXPECT_EQ(folder_.entries(), std::vector<std::string>{"algos.txt"});
  ConvAlgorithmCache cache;
  EXPECT_EQ(read_algorithm_file(cache, path(), kIdentity).entries, 3);
}

}  // namespace
}  // namespace kiln::cuda
