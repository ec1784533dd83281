// Generator state bookkeeping and the per-device default generators (see generator.h).
#include "core/generator.h"

#include <map>
#include <memory>
#include <utility>

#include "core/error.h"

namespace kiln {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mutex_);
  KILN_CHECK(capture_base_ == nullptr, "manual_seed: the generator is drawing for a CUDA graph being captured; "
             "seed it before the capture or between replays");
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard lock(mutex_);
  return seed_;
}

bool Generator::capturing_here() const {
  return capture_base_ != nullptr && capture_thread_ == std::this_thread::get_id();
}

uint64_t Generator::offset() const {
  std::lock_guard lock(mutex_);
  return capturing_here() ? capture_offset_ : offset_;
}

void Generator::set_state(PhiloxState state) {
  std::lock_guard lock(mutex_);
  if (capturing_here()) {
    KILN_CHECK(state.base == capture_base_, "Generator::set_state: during a CUDA graph capture the generator takes "
               "only states it handed out in that capture (Note [Philox under capture])");
    capture_offset_ = state.offset;
    return;
  }
  KILN_CHECK(state.base == nullptr, "Generator::set_state: a state of a CUDA graph capture that has ended "
             "(its offset is relative to the graph's replays)");
  seed_ = state.seed;
  offset_ = state.offset;
}

PhiloxState Generator::state() const {
  std::lock_guard lock(mutex_);
  if (capturing_here()) return {0, capture_offset_, capture_base_};
  return {seed_, offset_};
}

PhiloxState Generator::reserve(uint64_t numel) {
  std::lock_guard lock(mutex_);
  const uint64_t blocks = numel / 2 + numel % 2;  // ceil(numel / 2) without overflow
  if (capturing_here()) {
    const PhiloxState start{0, capture_offset_, capture_base_};
    capture_offset_ += blocks;
    return start;
  }
  const PhiloxState start{seed_, offset_};
  offset_ += blocks;
  return start;
}

PhiloxState Generator::advance(uint64_t blocks) {
  std::lock_guard lock(mutex_);
  KILN_CHECK(!capturing_here(), "Generator::advance: not during a capture on this thread");
  const PhiloxState start{seed_, offset_};
  offset_ += blocks;
  return start;
}

void Generator::begin_capture(Device device, const uint64_t* base) {
  KILN_CHECK(base != nullptr, "Generator::begin_capture: no base");
  std::lock_guard lock(mutex_);
  KILN_CHECK(capture_base_ == nullptr, "Generator::begin_capture: the generator already draws for a capture "
             "(one CUDA graph captures with it at a time)");
  capture_base_ = base;
  capture_thread_ = std::this_thread::get_id();
  capture_device_ = device;
  capture_offset_ = 0;
}

uint64_t Generator::end_capture() {
  std::lock_guard lock(mutex_);
  KILN_CHECK(capture_base_ != nullptr, "Generator::end_capture without begin_capture");
  capture_base_ = nullptr;
  return std::exchange(capture_offset_, 0);
}

bool Generator::capturing() const {
  std::lock_guard lock(mutex_);
  return capturing_here();
}

Device Generator::capture_device() const {
  std::lock_guard lock(mutex_);
  return capture_device_;
}

namespace {

struct GeneratorRegistry {
  std::mutex mutex;
  std::map<std::pair<int, int>, std::unique_ptr<Generator>> generators;
  uint64_t seed_for_new = kDefaultSeed;  // the last manual_seed, for devices not used yet
};

GeneratorRegistry& registry() {
  static GeneratorRegistry r;
  return r;
}

}  // namespace

Generator& default_generator(Device device) {
  GeneratorRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  auto& slot = r.generators[{static_cast<int>(device.type), device.index}];
  if (!slot) slot = std::make_unique<Generator>(r.seed_for_new);
  return *slot;
}

void manual_seed(uint64_t seed) {
  GeneratorRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  r.seed_for_new = seed;
  for (auto& [key, generator] : r.generators) generator->manual_seed(seed);
}

}  // namespace kiln
