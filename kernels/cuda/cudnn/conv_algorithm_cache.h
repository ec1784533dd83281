// Which cuDNN algorithm runs a convolution: the cache and its rules, with no CUDA in it.
//
// cuDNN offers several algorithms for each convolution pass (implicit GEMM, FFT,
// Winograd, ...); which is fastest depends on the shapes, the dtype, the memory layout,
// the math type and the GPU, and some need a scratch workspace of up to gigabytes. This
// file decides, for one key, which to run; conv_algorithms.cpp plugs in the real cuDNN
// (ConvAlgorithmSource) and the caching allocator (WorkspaceMemory), and the host tests
// (tests/cuda/host/test_conv_algorithm_cache.cpp) plug in fakes. Being host C++, it is
// compiled in every configuration (kiln_conv_algorithm_cache, kernels/CMakeLists.txt).
//
// Note [Choosing a conv algorithm]: for a key,
//   1. the cache answers if it holds the key (a hit), unless benchmark mode is on and the
//      entry came from heuristics, which a search then replaces;
//   2. otherwise, in benchmark mode, a search times every algorithm on the real tensors
//      (cudnnFind*AlgorithmEx, a "find") with the largest workspace that can be allocated:
//      the most any algorithm asks for, halved until an allocation succeeds; out of
//      benchmark mode, cuDNN's heuristics rank the algorithms (a "heuristic lookup");
//   3. the ranking keeps only usable algorithms (Note [Usable algorithms]) and is cached;
//   4. the first algorithm of the ranking whose workspace can be allocated now runs.
// So an algorithm needing more memory than is free is skipped, never an out-of-memory
// error, and a cached ranking still adapts when memory is short on a later call.
//
// Note [Usable algorithms]: only algorithm numbers cuDNN defines for the pass
// (kConvAlgorithmCount); in deterministic mode only algorithms cuDNN reports as
// deterministic; after a search, only algorithms whose workspace fit the search's
// workspace (the others were not really timed). And when TF32 is not allowed for float32
// (key math Fma), an algorithm cuDNN reports in a tensor-op math is dropped and every other
// one runs in FMA math (cuDNN's "default" math would allow TF32), so neither heuristics
// nor a search can smuggle TF32 in, nor hand us an algorithm that has no FMA kernel.
// One function applies these rules (usable_ranking, with why_unusable per algorithm) to
// every ranking that enters the cache: cuDNN's heuristics, a search, and an entry loaded
// from a file (Note [Algorithm cache file]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cudnn.h"
#include "core/dims.h"
#include "core/dtype.h"

namespace kiln::cuda {

enum class ConvPass : uint8_t { Forward, BackwardData, BackwardFilter };
inline constexpr int kNumConvPasses = 3;
const char* conv_pass_name(ConvPass pass);  // "forward", "backward_data", "backward_filter"

// cuDNN's math types (cudnnMathType_t), by name.
enum class ConvMath : uint8_t { Default, TensorOp, TensorOpAllowConversion, Fma };
const char* conv_math_name(ConvMath math);  // "default", "tensor_op", "tensor_op_conversion", "fma"

// Everything that changes which algorithm is right, or whether it is allowed.
// Sizes are those the op passed (a 1-d conv keeps its rank-3 shapes here).
struct ConvKey {
  ConvPass pass = ConvPass::Forward;
  int device = 0;
  DType dtype = DType::Float32;
  ConvMath math = ConvMath::Default;  // Note [TF32] in core/flags.h
  bool deterministic = false;
  int64_t groups = 1;
  // Dims, not vectors: a key is made at every convolution call (Note [Dims in place]).
  Dims input_sizes;    // [N, C_in, s...]
  Dims input_strides;  // memory layout of the input
  Dims weight_sizes;   // [C_out, C_in / groups, k...]
  // The filter's layout: KC<spatial> (false) or channels-last K<spatial>C (true). An input
  // that is both layouts at once (1x1x1 spatial, one channel) meets either filter, and
  // cuDNN's algorithms for the two differ: the input's strides alone do not tell.
  bool channels_last_filter = false;
  Dims stride;
  Dims padding;
  Dims dilation;

  friend bool operator==(const ConvKey&, const ConvKey&) = default;
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& key) const;
};

// One algorithm for a key, as cuDNN's heuristics ranked it or a search timed it.
struct ConvAlgorithm {
  int algo = 0;  // the cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t value
  ConvMath math = ConvMath::Default;  // the math type it runs in
  size_t workspace_bytes = 0;
  bool deterministic = false;
  // What a search measured (cudnnFind's time, milliseconds); < 0 when it was not timed
  // (heuristics, or an entry loaded from a file). A measurement, not part of what the
  // algorithm is: equality leaves it out.
  float time_ms = -1.0f;

  friend bool operator==(const ConvAlgorithm& a, const ConvAlgorithm& b) {
    return a.algo == b.algo && a.math == b.math && a.workspace_bytes == b.workspace_bytes &&
           a.deterministic == b.deterministic;
  }
};

// What the cache asks of cuDNN for one convolution (conv_algorithms.cpp).
class ConvAlgorithmSource {
 public:
  virtual ~ConvAlgorithmSource() = default;
  // Supported algorithms, best first by cuDNN's heuristics (cudnnGet*Algorithm_v7).
  virtual std::vector<ConvAlgorithm> heuristics(const ConvKey& key) = 0;
  // The most workspace any supported algorithm asks for (what a search would like).
  virtual size_t max_workspace_bytes(const ConvKey& key) = 0;
  // Algorithms that ran successfully with at most `workspace_bytes` of workspace at
  // `workspace`, fastest first (cudnnFind*AlgorithmEx).
  virtual std::vector<ConvAlgorithm> search(const ConvKey& key, void* workspace, size_t workspace_bytes) = 0;
};

// Workspace memory: try_allocate returns null when `nbytes` (> 0) cannot be had now.
class WorkspaceMemory {
 public:
  virtual ~WorkspaceMemory() = default;
  virtual void* try_allocate(size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
};

// A workspace held for one call (RAII; empty when the algorithm needs none).
class Workspace {
 public:
  Workspace() = default;
  Workspace(WorkspaceMemory* memory, void* ptr, size_t bytes) : memory_(memory), ptr_(ptr), bytes_(bytes) {}
  ~Workspace() { reset(); }
  Workspace(Workspace&& other) noexcept { *this = std::move(other); }
  Workspace& operator=(Workspace&& other) noexcept;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void reset();
  WorkspaceMemory* memory_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// `bytes` of workspace, or an empty Workspace when it cannot be allocated (0 bytes is
// always had). The boolean says whether it was.
std::pair<bool, Workspace> try_workspace(WorkspaceMemory& memory, size_t bytes);

// The largest workspace up to `wanted` that can be allocated: `wanted`, then halves of
// it down to kMinSearchWorkspace, then none (Note [Choosing a conv algorithm], step 2).
inline constexpr size_t kMinSearchWorkspace = size_t{1} << 20;
Workspace largest_workspace(WorkspaceMemory& memory, size_t wanted);

// How many algorithms cuDNN defines for each pass (by ConvPass): the algorithm numbers are
// 0 .. count - 1 (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t's *_ALGO_COUNT, which
// conv_algorithms.cpp checks against cudnn.h).
inline constexpr int kConvAlgorithmCount[kNumConvPasses] = {8, 6, 7};

// Note [Usable algorithms]: why `algorithm` may not run for `key` ("not deterministic,
// but the key is in deterministic mode", ...), or null when it may. `search_workspace` is
// the search's workspace size (SIZE_MAX for a heuristic ranking or a loaded one).
const char* why_unusable(const ConvKey& key, const ConvAlgorithm& algorithm, size_t search_workspace);
inline bool usable(const ConvKey& key, const ConvAlgorithm& algorithm, size_t search_workspace) {
  return why_unusable(key, algorithm, search_workspace) == nullptr;
}
// `algorithm` with the math type it runs in for `key` (FMA when the key's math is FMA).
ConvAlgorithm run_as(const ConvKey& key, ConvAlgorithm algorithm);

// An algorithm usable_ranking left out, and why_unusable's reason.
struct RefusedAlgorithm {
  ConvAlgorithm algorithm;
  const char* why;
};
// The usable algorithms of `offered`, in its order, each as it runs (run_as): what the
// cache keeps of a ranking, whoever made it. Each one left out is added to `refused`
// when given.
std::vector<ConvAlgorithm> usable_ranking(const ConvKey& key, const std::vector<ConvAlgorithm>& offered,
                                          size_t search_workspace,
                                          std::vector<RefusedAlgorithm>* refused = nullptr);

class ConvAlgorithmCache {
 public:
  // A cached ranking: usable algorithms, best first, and whether a search made it; and
  // how many convolutions chose from it since the last reset_stats() (Note [A step's
  // speed of light] in core/cudnn.h).
  struct Entry {
    std::vector<ConvAlgorithm> ranking;
    bool searched = false;
    int64_t calls = 0;
    // The least time_ms a search measured among the usable algorithms; < 0 when none was timed.
    float fastest_ms() const;
  };
  // The algorithm to run now, with its workspace allocated (from the `memory` given to
  // choose(), which must outlive the Choice).
  struct Choice {
    ConvAlgorithm algorithm;
    Workspace workspace;
  };

  // Note [Choosing a conv algorithm]. Throws kiln::Error when cuDNN offers no usable
  // algorithm for the key, or none whose workspace can be allocated.
  Choice choose(const ConvKey& key, bool benchmark, ConvAlgorithmSource& source, WorkspaceMemory& memory);

  cudnn::Stats stats() const;
  void reset_stats();
  void clear();
  size_t size() const;
  // Every entry, for saving (in no particular order), and adding one as given, for
  // loading (whose entries have passed usable_ranking, Note [Algorithm cache file]).
  std::vector<std::pair<ConvKey, Entry>> entries() const;
  void insert(const ConvKey& key, Entry entry);

 private:
  std::optional<std::vector<ConvAlgorithm>> lookup(const ConvKey& key, bool benchmark);
  Entry rank(const ConvKey& key, bool benchmark, ConvAlgorithmSource& source, WorkspaceMemory& memory);
  void keep_ranking(const ConvKey& key, Entry entry);
  cudnn::PassStats& pass_stats(ConvPass pass);

  mutable std::mutex mutex_;
  std::unordered_map<ConvKey, Entry, ConvKeyHash> entries_;
  cudnn::Stats stats_;
};

// The cache's entries as cudnn::conv_uses reports them: described keys ordered by their
// description, each with its calls and fastest searched time.
std::vector<cudnn::ConvUse> conv_uses_of(const std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>>& entries);

// "forward float16 math=tensor_op det=0 groups=1 input=[8, 64, 28, 28, 28] ..." for messages.
std::string describe(const ConvKey& key);

}  // namespace kiln::cuda
