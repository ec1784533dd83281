// The switches of core/cudnn.h, and its cache operations forwarded to the CUDA backend
// (Backend's convolution algorithm cache entries, core/backend.h): the cache belongs to
// the CUDA backend (its keys hold cuDNN algorithm numbers; its file is keyed by the GPU and
// the cuDNN version), but users reach it from core's API, as they reach
// torch.backends.cudnn.
#include "core/cudnn.h"

#include <atomic>

#include "core/backend.h"

namespace kiln::cudnn {
namespace {

std::atomic<bool> benchmark_mode{false};
std::atomic<bool> deterministic_mode{false};

}  // namespace

void set_benchmark(bool enabled) { benchmark_mode.store(enabled, std::memory_order_relaxed); }
bool benchmark() { return benchmark_mode.load(std::memory_order_relaxed); }
void set_deterministic(bool enabled) { deterministic_mode.store(enabled, std::memory_order_relaxed); }
bool deterministic() { return deterministic_mode.load(std::memory_order_relaxed); }

ScopedMode::ScopedMode(bool benchmark_now, bool deterministic_now)
    : benchmark_(benchmark()), deterministic_(deterministic()) {
  set_benchmark(benchmark_now);
  set_deterministic(deterministic_now);
}

ScopedMode::~ScopedMode() {
  set_benchmark(benchmark_);
  set_deterministic(deterministic_);
}

Stats stats() { return cuda_is_available() ? backend(Device::cuda()).conv_algorithm_stats() : Stats{}; }

void reset_stats() {
  if (cuda_is_available()) backend(Device::cuda()).reset_conv_algorithm_stats();
}

std::vector<ConvUse> conv_uses() {
  return cuda_is_available() ? backend(Device::cuda()).conv_uses() : std::vector<ConvUse>{};
}

void clear_algorithm_cache() {
  if (cuda_is_available()) backend(Device::cuda()).clear_conv_algorithm_cache();
}

// backend(Device::cuda()) is the "CUDA is not available: <why>" error without CUDA.
SaveReport save_algorithm_cache(const std::string& path) {
  return backend(Device::cuda()).save_conv_algorithm_cache(path);
}

LoadReport load_algorithm_cache(const std::string& path) {
  return backend(Device::cuda()).load_conv_algorithm_cache(path);
}

}  // namespace kiln::cudnn
