// Numbers: the small dataset of the DataLoader and DevicePrefetcher tests. Sample i holds
// "x" = [i, i] (float32), "label" = i (int64) and the metadata path "v<i>"; get() may
// sleep a pseudo-random few ms (so workers finish out of order), throw at `fail_at`, or
// stall at `stall_at`, and counts its calls.
#pragma once

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/ops.h"
#include "data/dataset.h"

namespace kiln::testing {

// "v<i>" (built by append: GCC 12 warns falsely on "v" + std::to_string(i)).
inline std::string path_of(int64_t i) { return std::string("v").append(std::to_string(i)); }

class Numbers final : public data::Dataset {
 public:
  explicit Numbers(int64_t n, bool jitter = false, int64_t fail_at = -1, int64_t stall_at = -1)
      : n_(n), jitter_(jitter), fail_at_(fail_at), stall_at_(stall_at) {}
  int64_t size() const override { return n_; }
  data::Sample get(int64_t index) const override {
    check_index(index);
    ++gets;
    if (jitter_) std::this_thread::sleep_for(std::chrono::milliseconds((index * 7919) % 5));
    if (index == fail_at_) throw std::runtime_error("corrupt volume");
    if (index == stall_at_) std::this_thread::sleep_for(std::chrono::seconds(2));
    return {.tensors = {{"x", full({2}, static_cast<double>(index))},
                        {"label", full({}, index, {.dtype = DType::Int64})}},
            .metadata = {{"path", path_of(index)}}};
  }
  std::string name() const override { return "Numbers"; }
  mutable std::atomic<int64_t> gets{0};

 private:
  int64_t n_;
  bool jitter_;
  int64_t fail_at_, stall_at_;
};

}  // namespace kiln::testing
