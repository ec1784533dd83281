// NextIterator: a range-for iterator over anything with `std::optional<Batch> next()` (a
// DataLoader epoch, a DevicePrefetcher epoch): it pulls one batch ahead of the loop body
// and ends at the first nullopt.
//
//   for (Batch& batch : loader.epoch(e)) ...   // Epoch::begin() returns NextIterator<Epoch>
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <utility>

namespace kiln::data {

template <typename Source>
class NextIterator {
 public:
  using value_type = typename decltype(std::declval<Source&>().next())::value_type;
  using difference_type = std::ptrdiff_t;

  explicit NextIterator(Source* source) : source_(source) { ++*this; }
  value_type& operator*() { return *current_; }
  NextIterator& operator++() {
    current_ = source_->next();
    return *this;
  }
  bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

 private:
  Source* source_;
  std::optional<value_type> current_;
};

}  // namespace kiln::data
