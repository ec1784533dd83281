// VolumeCache (volume_cache.h): a map plus a recency list under one mutex.
#include "data/volume_cache.h"

namespace kiln::data {

Tensor VolumeCache::get(const std::string& key, const std::function<Tensor()>& load) {
  {
    const std::lock_guard lock(mutex_);
    const auto it = entries_.find(key);
    if (it != entries_.end()) {
      ++hits_;
      recency_.splice(recency_.begin(), recency_, it->second.recency);
      return it->second.volume;
    }
    ++misses_;
  }
  Tensor volume = load().contiguous();
  const auto bytes = static_cast<int64_t>(volume.numel()) * static_cast<int64_t>(volume.element_size());
  if (bytes > budget_bytes_) return volume;
  const std::lock_guard lock(mutex_);
  if (entries_.count(key) != 0) return entries_.at(key).volume;  // another thread kept it first
  while (bytes_ + bytes > budget_bytes_ && !recency_.empty()) {
    const auto oldest = entries_.find(recency_.back());
    bytes_ -= static_cast<int64_t>(oldest->second.volume.numel()) *
              static_cast<int64_t>(oldest->second.volume.element_size());
    entries_.erase(oldest);
    recency_.pop_back();
  }
  recency_.push_front(key);
  entries_.emplace(key, Entry{volume, recency_.begin()});
  bytes_ += bytes;
  return volume;
}

int64_t VolumeCache::bytes() const {
  const std::lock_guard lock(mutex_);
  return bytes_;
}

int64_t VolumeCache::size() const {
  const std::lock_guard lock(mutex_);
  return static_cast<int64_t>(entries_.size());
}

int64_t VolumeCache::hits() const {
  const std::lock_guard lock(mutex_);
  return hits_;
}

int64_t VolumeCache::misses() const {
  const std::lock_guard lock(mutex_);
  return misses_;
}

}  // namespace kiln::data
