// The value arange writes at index i, written once for both backends (kernels/cpu/copy.cpp
// and kernels/cuda/copy.cu).
//
// Integers: start + i * step, where the op layer has already checked that every value
// for i < n lies in int64 (core/ops/factory.cpp). The product i * step alone may not
// (arange(INT64_MIN, INT64_MAX, INT64_MAX) has 2 * step at i = 2), so the sum is taken in
// uint64, where overflow wraps instead of being undefined; the wrapped result equals the
// true one because the true one fits. Floating dtypes compute in double (the caller rounds).
#pragma once

#include <cstdint>

#include "core/half.h"  // KILN_HOST_DEVICE

namespace kiln {

KILN_HOST_DEVICE inline int64_t arange_integral_value(int64_t start, int64_t step, int64_t i) {
  return static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(step) * static_cast<uint64_t>(i));
}

KILN_HOST_DEVICE inline double arange_floating_value(double start, double step, int64_t i) {
  return start + step * static_cast<double>(i);
}

}  // namespace kiln
