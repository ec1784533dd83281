// Dims: a tensor's sizes or strides, a short list of int64 kept inside the object.
//
// Note [Dims in place]: every tensor, view and autograd node holds sizes and strides, and
// a small op makes several of them. Held as std::vector, each was a heap allocation and
// a free: about a third of the host cost of a small op (bench/host_cost). Almost every
// tensor has at most kInline dims (a 3D CNN's are 5-d), so Dims keeps up to kInline values
// in place and moves to the heap only past that, as PyTorch's SizesAndStrides does.
//
// It reads like a std::vector<int64_t> (size, [], begin/end, data, push_back, insert,
// erase, resize, ==) and converts to one implicitly, so code that wants a vector still
// gets one (paying the allocation Dims saves); code on a hot path takes `IntList` (a span)
// or `const Dims&` instead. A std::vector or a braced list converts to Dims implicitly.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <span>
#include <vector>

namespace kiln {

// A read-only list of sizes, strides or dims: what shape helpers take, so a Dims, a
// std::vector and an array all pass without a copy.
using IntList = std::span<const int64_t>;

class Dims {
 public:
  static constexpr size_t kInline = 6;
  using value_type = int64_t;
  using size_type = size_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reference = int64_t&;
  using const_reference = const int64_t&;

  Dims() = default;
  Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.size()); }
  Dims(const std::vector<int64_t>& values) { assign(values.data(), values.size()); }  // NOLINT: implicit
  explicit Dims(IntList values) { assign(values.data(), values.size()); }
  explicit Dims(size_t count) { resize(count, 0); }
  Dims(size_t count, int64_t value) { resize(count, value); }
  template <std::input_iterator It>
  Dims(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  Dims(const Dims& other) { assign(other.data(), other.size()); }
  Dims(Dims&& other) noexcept { take(other); }
  Dims& operator=(const Dims& other) {
    if (this != &other) assign(other.data(), other.size());
    return *this;
  }
  Dims& operator=(Dims&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~Dims() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ != nullptr ? heap_ : inline_; }
  const int64_t* data() const { return heap_ != nullptr ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t& operator[](size_t i) const { return data()[i]; }
  int64_t& front() { return data()[0]; }
  const int64_t& front() const { return data()[0]; }
  int64_t& back() { return data()[size_ - 1]; }
  const int64_t& back() const { return data()[size_ - 1]; }

  void reserve(size_t capacity) {
    if (capacity > capacity_) grow(capacity);
  }
  void resize(size_t count, int64_t value = 0) {
    reserve(count);
    for (size_t i = size_; i < count; ++i) data()[i] = value;
    size_ = count;
  }
  void clear() { size_ = 0; }
  void push_back(int64_t value) {
    if (size_ == capacity_) reserve(2 * capacity_);
    data()[size_++] = value;
  }
  void pop_back() { --size_; }
  iterator insert(const_iterator position, int64_t value);
  template <std::input_iterator It>
  iterator insert(const_iterator position, It first, It last) {
    const auto at = position - begin();
    const Dims values(first, last);  // first, copied: the range may be this list's own values
    const size_t before = size_;
    for (const int64_t value : values) push_back(value);
    std::rotate(begin() + at, begin() + before, end());  // the appended values into place
    return begin() + at;
  }
  iterator erase(const_iterator position);

  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  friend bool operator==(const Dims& a, const Dims& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const Dims& a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  // Lexicographic, as std::vector's: so a Dims can be part of an ordered key.
  friend auto operator<=>(const Dims& a, const Dims& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  // The small-list paths are inline (a small op moves and copies a dozen Dims); the heap
  // ones are out of line, in dims.cpp.
  void assign(const int64_t* values, size_t count) {
    if (count <= kInline && heap_ == nullptr) {
      for (size_t i = 0; i < count; ++i) inline_[i] = values[i];
      size_ = count;
      return;
    }
    assign_slow(values, count);
  }
  // A move copies the whole in-place array, a fixed 48 bytes, rather than a loop of size_.
  void take(Dims& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    heap_ = other.heap_;
    if (heap_ == nullptr) std::memcpy(inline_, other.inline_, sizeof inline_);  // a constant size: inlined
    other.heap_ = nullptr;
    other.size_ = 0;
    other.capacity_ = kInline;
  }
  void release() noexcept {
    if (heap_ == nullptr) return;
    delete[] heap_;
    heap_ = nullptr;
    capacity_ = kInline;
  }
  void assign_slow(const int64_t* values, size_t count);
  void grow(size_t capacity);

  int64_t inline_[kInline] = {};
  int64_t* heap_ = nullptr;  // the values when there are more than kInline
  size_t size_ = 0;
  size_t capacity_ = kInline;
};

// "[2, 3, 4]": how shapes appear in error messages (also for std::vector, core/error.h).
std::ostream& write_int_list(std::ostream& os, IntList values);
std::ostream& operator<<(std::ostream& os, const Dims& dims);

}  // namespace kiln
