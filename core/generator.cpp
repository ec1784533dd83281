// Generator state bookkeeping and the per-device default generators (see generator.h).
#include "core/generator.h"

#include <map>
#include <memory>
#include <utility>

namespace kiln {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard lock(mutex_);
  return offset_;
}

void Generator::set_state(PhiloxState state) {
  std::lock_guard lock(mutex_);
  seed_ = state.seed;
  offset_ = state.offset;
}

PhiloxState Generator::state() const {
  std::lock_guard lock(mutex_);
  return {seed_, offset_};
}

PhiloxState Generator::reserve(uint64_t numel) {
  std::lock_guard lock(mutex_);
  const PhiloxState start{seed_, offset_};
  offset_ += (numel + 1) / 2;
  return start;
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
