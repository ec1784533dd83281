// The Backend interface's own defaults (core/backend.{h,cpp}), through the CPU backend,
// which keeps them: a backend without a convolution algorithm cache reports no counters
// (even after convolutions ran on it), resets and clears as no-ops, and refuses to save or
// load a cache with an error naming the file, touching no file. Needs no GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/backend.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

void expect_no_counters(const cudnn::Stats& stats) {
  for (const cudnn::PassStats& pass : {stats.forward, stats.backward_data, stats.backward_filter}) {
    EXPECT_EQ(pass.finds, 0);
    EXPECT_EQ(pass.heuristic_lookups, 0);
    EXPECT_EQ(pass.hits, 0);
  }
}

TEST(Backend, WithoutAnAlgorithmCacheCountersAreEmpty) {
  Backend& cpu = backend(Device::cpu());
  expect_no_counters(cpu.conv_algorithm_stats());
  const Tensor input = testing::random_nonzero({1, 2, 5, 5}, DType::Float32, 1);
  const Tensor weight = testing::random_nonzero({3, 2, 3, 3}, DType::Float32, 2);
  conv2d(input, weight);
  conv2d(input, weight);
  expect_no_counters(cpu.conv_algorithm_stats());
  EXPECT_NO_THROW(cpu.reset_conv_algorithm_stats());
  EXPECT_NO_THROW(cpu.clear_conv_algorithm_cache());
  expect_no_counters(cpu.conv_algorithm_stats());
}

TEST(Backend, WithoutAnAlgorithmCacheSaveAndLoadAreErrorsNamingTheFile) {
  std::string folder = (fs::temp_directory_path() / "kiln_backend_XXXXXX").string();
  ASSERT_NE(::mkdtemp(folder.data()), nullptr);
  const std::string saved = (fs::path(folder) / "never_written.txt").string();
  const std::string existing = (fs::path(folder) / "cache.txt").string();
  std::ofstream(existing) << "not read\n";

  Backend& cpu = backend(Device::cpu());
  EXPECT_KILN_ERROR(cpu.save_conv_algorithm_cache(saved), "save_algorithm_cache",
                    "this backend has no convolution algorithm cache", saved);
  EXPECT_FALSE(fs::exists(saved));
  EXPECT_KILN_ERROR(cpu.load_conv_algorithm_cache(existing), "load_algorithm_cache",
                    "this backend has no convolution algorithm cache", existing);
  EXPECT_EQ(fs::file_size(existing), std::string("not read\n").size());
  fs::remove_all(folder);
}

}  // namespace
}  // namespace kiln
