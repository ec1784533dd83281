// Dims (dims.h): the values in place up to kInline, on the heap past that.
#include "core/dims.h"

#include <cstring>
#include <ostream>

namespace kiln {

void Dims::grow(size_t capacity) {
  auto* grown = new int64_t[capacity];
  std::copy(begin(), end(), grown);
  delete[] heap_;
  heap_ = grown;
  capacity_ = capacity;
}

Dims::iterator Dims::insert(const_iterator position, int64_t value) {
  const size_t at = static_cast<size_t>(position - begin());
  push_back(value);  // grows if needed; the new last value then rotates into place
  std::rotate(begin() + at, end() - 1, end());
  return begin() + at;
}

Dims::iterator Dims::erase(const_iterator position) {
  const size_t at = static_cast<size_t>(position - begin());
  std::copy(begin() + at + 1, end(), begin() + at);
  --size_;
  return begin() + at;
}

void Dims::assign_slow(const int64_t* values, size_t count) {
  reserve(count);
  if (count > 0) std::memmove(data(), values, count * sizeof(int64_t));
  size_ = count;
}

std::ostream& write_int_list(std::ostream& os, IntList values) {
  os << '[';
  for (size_t i = 0; i < values.size(); ++i) os << (i > 0 ? ", " : "") << values[i];
  return os << ']';
}

std::ostream& operator<<(std::ostream& os, const Dims& dims) { return write_int_list(os, dims); }

}  // namespace kiln
