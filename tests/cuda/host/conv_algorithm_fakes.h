// Fakes for the conv algorithm cache's host tests (test_conv_algorithm_cache.cpp,
// test_conv_algorithm_file.cpp): a key and algorithms to vary, a fake cuDNN (FakeSource)
// that ranks and "times" made-up algorithms, and a fake allocator (FakeWorkspaceMemory)
// that refuses requests above a limit, so no GPU is needed.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/cuda/cudnn/conv_algorithm_cache.h"

namespace kiln::cuda::testing {

inline constexpr size_t kMiB = size_t{1} << 20;

inline ConvKey base_key() {
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

inline ConvAlgorithm algorithm(int algo, size_t workspace, bool deterministic = true, ConvMath math = ConvMath::Fma) {
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

}  // namespace kiln::cuda::testing
