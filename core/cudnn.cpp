// The switches of core/cudnn.h and the forwarding of its cache operations to the hooks
// the CUDA backend registers.
//
// Note [Algorithm cache hooks]: the cache belongs to the CUDA backend (its keys hold cuDNN
// algorithm numbers; its file is keyed by the GPU and the cuDNN version), but users reach
// it from core's API, as they reach torch.backends.cudnn. A table of five functions,
// registered explicitly by kiln::init() like the backends themselves, keeps the Backend
// interface a list of kernels: cache statistics, saving and loading are not kernels, and
// no other backend would implement them.
#include "core/cudnn.h"

#include <atomic>

#include "core/backend.h"
#include "core/error.h"

namespace kiln::cudnn {
namespace {

std::atomic<bool> benchmark_mode{false};
std::atomic<bool> deterministic_mode{false};
std::atomic<const AlgorithmCacheHooks*> hooks{nullptr};

const AlgorithmCacheHooks& require_hooks(const char* op) {
  const AlgorithmCacheHooks* h = hooks.load(std::memory_order_acquire);
  KILN_CHECK(h != nullptr, "CUDA is not available: ", cuda_unavailable_reason(), " (cudnn::", op,
             " needs the CUDA backend's algorithm cache)");
  return *h;
}

}  // namespace

void set_benchmark(bool enabled) { benchmark_mode.store(enabled, std::memory_order_relaxed); }
bool benchmark() { return benchmark_mode.load(std::memory_order_relaxed); }
void set_deterministic(bool enabled) { deterministic_mode.store(enabled, std::memory_order_relaxed); }
bool deterministic() { return deterministic_mode.load(std::memory_order_relaxed); }

Stats stats() {
  const AlgorithmCacheHooks* h = hooks.load(std::memory_order_acquire);
  return h != nullptr ? h->stats() : Stats{};
}

void reset_stats() {
  if (const AlgorithmCacheHooks* h = hooks.load(std::memory_order_acquire)) h->reset_stats();
}

void clear_algorithm_cache() {
  if (const AlgorithmCacheHooks* h = hooks.load(std::memory_order_acquire)) h->clear();
}

int64_t save_algorithm_cache(const std::string& path) { return require_hooks("save_algorithm_cache").save(path); }

LoadReport load_algorithm_cache(const std::string& path) { return require_hooks("load_algorithm_cache").load(path); }

void register_algorithm_cache(const AlgorithmCacheHooks* cache_hooks) {
  hooks.store(cache_hooks, std::memory_order_release);
}

}  // namespace kiln::cudnn
