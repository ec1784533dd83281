// VolumeCache: decoded volumes kept in memory, up to a byte budget, so that a dataset of
// compressed scans decodes each file once rather than once per epoch (MONAI's
// CacheDataset idea, bounded). Safe to use from the loader's worker threads: lookups and
// insertions take a lock, decoding does not (two workers may decode the same file at the
// same moment; both get the same values, one copy is kept). When a new volume does not
// fit, the least recently used ones are dropped; a volume larger than the whole budget is
// returned without being kept. A budget of 0 keeps nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include "core/tensor.h"

namespace kiln::data {

class VolumeCache {
 public:
  explicit VolumeCache(int64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // The volume for `key`: the cached one, else load() (outside the lock), kept if it fits.
  // Cached tensors are shared: callers must not change them in place (transforms make
  // new tensors).
  Tensor get(const std::string& key, const std::function<Tensor()>& load);

  int64_t bytes() const;
  int64_t size() const;
  int64_t hits() const;
  int64_t misses() const;

 private:
  struct Entry {
    Tensor volume;
    std::list<std::string>::iterator recency;
  };
  int64_t budget_bytes_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  std::list<std::string> recency_;  // most recently used first
  int64_t bytes_ = 0, hits_ = 0, misses_ = 0;
};

}  // namespace kiln::data
