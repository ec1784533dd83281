// The Backend interface's own defaults (core/backend.{h,cpp}), through the CPU backend,
// which keeps them: a backend without a convolution algorithm cache reports no counters
// (even after convolutions ran on it), resets and clears as no-ops, and refuses to save or
// load a cache with an error naming the file, touching no file. Needs no GPU.
#include <gtest/gtest.h>

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
  const testing::TempFolder folder;
  const std::string saved = folder.file("never_written.txt");
  const std::string existing = folder.file("cache.txt");
  std::ofstream(existing) << "not read\n";

  Backend& cpu = backend(Device::cpu());
  EXPECT_KILN_ERROR(cpu.save_conv_algorithm_cache(saved), "save_algorithm_cache",
                    "this backend has no convolution algorithm cache", saved);
  EXPECT_FALSE(fs::exists(saved));
  EXPECT_KILN_ERROR(cpu.load_conv_algorithm_cache(existing), "load_algorithm_cache",
                    "this backend has no convolution algorithm cache", existing);
  EXPECT_EQ(fs::file_size(existing), std::string("not read\n").size());
}

}  // namespace
}  // namespace kiln
