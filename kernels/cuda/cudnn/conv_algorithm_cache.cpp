// The algorithm cache of conv_algorithm_cache.h: keys, usability, workspace sizing, and
// the lookup-or-rank-then-allocate loop of Note [Choosing a conv algorithm].
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "core/error.h"

namespace kiln::cuda {

const char* conv_pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return "forward";
    case ConvPass::BackwardData: return "backward_data";
    case ConvPass::BackwardFilter: return "backward_filter";
  }
  return "?";
}

const char* conv_math_name(ConvMath math) {
  switch (math) {
    case ConvMath::Default: return "default";
    case ConvMath::TensorOp: return "tensor_op";
    case ConvMath::TensorOpAllowConversion: return "tensor_op_conversion";
    case ConvMath::Fma: return "fma";
  }
  return "?";
}

namespace {

// boost::hash_combine's mixing step.
void mix(size_t& seed, size_t value) { seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

void mix_list(size_t& seed, IntList values) {
  mix(seed, values.size());  // so [1, 2] + [3] and [1] + [2, 3] differ
  for (int64_t v : values) mix(seed, std::hash<int64_t>{}(v));
}

}  // namespace

size_t ConvKeyHash::operator()(const ConvKey& key) const {
  size_t seed = 0;
  mix(seed, static_cast<size_t>(key.pass));
  mix(seed, static_cast<size_t>(key.device));
  mix(seed, static_cast<size_t>(key.dtype));
  mix(seed, static_cast<size_t>(key.math));
  mix(seed, key.deterministic ? 1 : 0);
  mix(seed, static_cast<size_t>(key.groups));
  mix(seed, key.channels_last_filter ? 1 : 0);
  for (const auto* list : {&key.input_sizes, &key.input_strides, &key.weight_sizes, &key.stride, &key.padding,
                           &key.dilation}) {
    mix_list(seed, *list);
  }
  return seed;
}

std::string describe(const ConvKey& key) {
  std::ostringstream os;
  os << conv_pass_name(key.pass) << " on cuda:" << key.device << ", " << dtype_name(key.dtype) << ", math "
     << conv_math_name(key.math) << (key.deterministic ? ", deterministic" : "") << ", input "
     << key.input_sizes << " (strides " << key.input_strides << "), weight " << key.weight_sizes
     << (key.channels_last_filter ? " (channels-last)" : "") << ", stride " << key.stride << ", padding "
     << key.padding << ", dilation " << key.dilation << ", groups " << key.groups;
  return os.str();
}

std::vector<cudnn::ConvUse> conv_uses_of(const std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>>& entries) {
  std::vector<cudnn::ConvUse> uses;
  uses.reserve(entries.size());
  for (const auto& [key, entry] : entries) {
    uses.push_back({.key = describe(key), .calls = entry.calls, .fastest_ms = entry.fastest_ms()});
  }
  std::sort(uses.begin(), uses.end(), [](const cudnn::ConvUse& a, const cudnn::ConvUse& b) { return a.key < b.key; });
  return uses;
}

Workspace& Workspace::operator=(Workspace&& other) noexcept {
  if (this != &other) {
    reset();
    memory_ = std::exchange(other.memory_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Workspace::reset() {
  if (ptr_ != nullptr) memory_->free(ptr_);
  memory_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

std::pair<bool, Workspace> try_workspace(WorkspaceMemory& memory, size_t bytes) {
  if (bytes == 0) return {true, Workspace()};
  void* ptr = memory.try_allocate(bytes);
  if (ptr == nullptr) return {false, Workspace()};
  return {true, Workspace(&memory, ptr, bytes)};
}

Workspace largest_workspace(WorkspaceMemory& memory, size_t wanted) {
  // `wanted` itself first, even below the floor (a search wanting 64 KiB must get it, not
  // none); only the halving stops at kMinSearchWorkspace.
  for (size_t bytes = wanted; bytes > 0; bytes /= 2) {
    auto [ok, workspace] = try_workspace(memory, bytes);
    if (ok) return std::move(workspace);
    if (bytes / 2 < kMinSearchWorkspace) break;
  }
  return Workspace();
}

const char* why_unusable(const ConvKey& key, const ConvAlgorithm& algorithm, size_t search_workspace) {
  const int pass = static_cast<int>(key.pass);
  if (pass < 0 || pass >= kNumConvPasses || algorithm.algo < 0 || algorithm.algo >= kConvAlgorithmCount[pass]) {
    return "not an algorithm cuDNN defines for this pass";
  }
  if (key.deterministic && !algorithm.deterministic) return "not deterministic, but the key is in deterministic mode";
  // Without TF32, an algorithm cuDNN offers only in a tensor-op math is not one we may
  // run: forced into FMA math it may not exist (NOT_SUPPORTED at run time, after its
  // workspace size was accepted), and a search timed its tensor-op kernel, not ours.
  const bool tensor_op = algorithm.math == ConvMath::TensorOp || algorithm.math == ConvMath::TensorOpAllowConversion;
  if (key.math == ConvMath::Fma && tensor_op) {
    return "a tensor-op math algorithm, but the key's math is fma (TF32 not allowed)";
  }
  if (algorithm.workspace_bytes > search_workspace) return "its workspace is larger than the search's";
  return nullptr;
}

std::vector<ConvAlgorithm> usable_ranking(const ConvKey& key, const std::vector<ConvAlgorithm>& offered,
                                          size_t search_workspace, std::vector<RefusedAlgorithm>* refused) {
  std::vector<ConvAlgorithm> ranking;
  for (const ConvAlgorithm& algorithm : offered) {
    if (const char* why = why_unusable(key, algorithm, search_workspace)) {
      if (refused != nullptr) refused->push_back({algorithm, why});
    } else {
      ranking.push_back(run_as(key, algorithm));
    }
  }
  return ranking;
}

ConvAlgorithm run_as(const ConvKey& key, ConvAlgorithm algorithm) {
  if (key.math == ConvMath::Fma) algorithm.math = ConvMath::Fma;
  return algorithm;
}

cudnn::PassStats& ConvAlgorithmCache::pass_stats(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return stats_.forward;
    case ConvPass::BackwardData: return stats_.backward_data;
    case ConvPass::BackwardFilter: return stats_.backward_filter;
  }
  KILN_ASSERT(false, "conv: unknown pass ", static_cast<int>(pass));
  __builtin_unreachable();
}

// The cached ranking of `key` (counting a hit), or none when it must be ranked: not
// cached, or benchmark mode and only heuristics ranked it so far.
std::optional<std::vector<ConvAlgorithm>> ConvAlgorithmCache::lookup(const ConvKey& key, bool benchmark) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end() || (benchmark && !it->second.searched)) return std::nullopt;
  ++pass_stats(key.pass).hits;
  ++it->second.calls;
  return it->second.ranking;
}

// Steps 2 and 3 of Note [Choosing a conv algorithm]. Runs without the lock: a search
// takes milliseconds, and two threads ranking the same key at once only repeat work.
ConvAlgorithmCache::Entry ConvAlgorithmCache::rank(const ConvKey& key, bool benchmark, ConvAlgorithmSource& source,
                                                   WorkspaceMemory& memory) {
  std::vector<ConvAlgorithm> offered;
  size_t search_workspace = SIZE_MAX;
  if (benchmark) {
    const Workspace workspace = largest_workspace(memory, source.max_workspace_bytes(key));
    search_workspace = workspace.bytes();
    offered = source.search(key, workspace.data(), workspace.bytes());
  } else {
    offered = source.heuristics(key);
  }
  Entry entry{.ranking = usable_ranking(key, offered, search_workspace), .searched = benchmark};
  std::lock_guard lock(mutex_);
  cudnn::PassStats& counters = pass_stats(key.pass);
  ++(benchmark ? counters.finds : counters.heuristic_lookups);
  return entry;
}

ConvAlgorithmCache::Choice ConvAlgorithmCache::choose(const ConvKey& key, bool benchmark,
                                                      ConvAlgorithmSource& source, WorkspaceMemory& memory) {
  std::optional<std::vector<ConvAlgorithm>> ranking = lookup(key, benchmark);
  if (!ranking) {
    Entry entry = rank(key, benchmark, source, memory);
    KILN_CHECK(!entry.ranking.empty(), "conv: cuDNN offers no usable algorithm",
               key.deterministic ? " (deterministic mode allows only deterministic ones)" : "", " for ",
               describe(key));
    ranking = entry.ranking;
    keep_ranking(key, std::move(entry));
  }
  size_t smallest = SIZE_MAX;
  for (const ConvAlgorithm& algorithm : *ranking) {
    auto [ok, workspace] = try_workspace(memory, algorithm.workspace_bytes);
    if (ok) return {algorithm, std::move(workspace)};
    smallest = std::min(smallest, algorithm.workspace_bytes);
  }
  KILN_CHECK(false, "conv: every cuDNN algorithm for ", describe(key),
             " needs more workspace than can be allocated now (the smallest needs ", smallest,
             " bytes); free some GPU memory or use smaller batches");
  __builtin_unreachable();
}

cudnn::Stats ConvAlgorithmCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void ConvAlgorithmCache::reset_stats() {
  std::lock_guard lock(mutex_);
  stats_ = {};
  for (auto& [key, entry] : entries_) entry.calls = 0;
}

void ConvAlgorithmCache::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

size_t ConvAlgorithmCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>> ConvAlgorithmCache::entries() const {
  std::lock_guard lock(mutex_);
  return {entries_.begin(), entries_.end()};
}

// Another thread may have ranked the key while this one did (rank runs unlocked): a
// heuristic ranking never replaces a searched one, whichever thread finishes last. Either
// way the key's calls count this one.
void ConvAlgorithmCache::keep_ranking(const ConvKey& key, Entry entry) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  if (it != entries_.end()) {
    ++it->second.calls;
    if (it->second.searched && !entry.searched) return;
    entry.calls = it->second.calls;
    it->second = std::move(entry);
    return;
  }
  entry.calls = 1;
  entries_.emplace(key, std::move(entry));
}

float ConvAlgorithmCache::Entry::fastest_ms() const {
  float fastest = -1.0f;
  for (const ConvAlgorithm& algorithm : ranking) {
    if (algorithm.time_ms >= 0 && (fastest < 0 || algorithm.time_ms < fastest)) fastest = algorithm.time_ms;
  }
  return fastest;
}

void ConvAlgorithmCache::insert(const ConvKey& key, Entry entry) {
  std::lock_guard lock(mutex_);
  entries_.insert_or_assign(key, std::move(entry));
}

}  // namespace kiln::cuda
