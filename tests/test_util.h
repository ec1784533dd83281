// Helpers shared by the test suites: random non-zero inputs, non-contiguous copies,
// per-dtype tolerances, closeness checks and error-message assertions.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops.h"

namespace kiln::testing {

// Values uniform in +-[0.5, 1.5] (never zero, away from kinks at 0), in `dtype`.
Tensor random_nonzero(const std::vector<int64_t>& sizes, DType dtype = DType::Float64, uint64_t seed = 1);
// Uniform in [low, high).
Tensor random_uniform(const std::vector<int64_t>& sizes, double low, double high,
                      DType dtype = DType::Float64, uint64_t seed = 1);
// The same values laid out non-contiguously (every other element of a larger buffer).
Tensor non_contiguous(const Tensor& t);
// Gradient-check inputs: float64 leaves that require grad, with random non-zero values
// (away from the kinks at 0), contiguous or laid out non-contiguously.
Tensor grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed);
Tensor strided_grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed);
// A float64 leaf that requires grad, uniform in [low, high) (zero and kinks not avoided:
// for smooth functions, and for domains such as sqrt's set by low and high).
Tensor uniform_leaf(const std::vector<int64_t>& sizes, uint64_t seed, double low = -1.5, double high = 1.5);

// The tolerance table (STYLE 10): absolute and relative, per dtype.
struct Tolerance {
  double atol;
  double rtol;
};
Tolerance tolerance_for(DType dtype);

// Elementwise |actual - expected| <= atol + rtol |expected| (NaNs must match), with the
// first mismatch in the failure message. Shapes must be equal.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected);
// Exact equality of shape, dtype and every value.
::testing::AssertionResult all_equal(const Tensor& actual, const Tensor& expected);

}  // namespace kiln::testing

// Expects `statement` to throw kiln::Error whose message contains every given substring.
#define EXPECT_KILN_ERROR(statement, ...)                                                   \
  do {                                                                                       \
    try {                                                                                    \
      statement;                                                                             \
      ADD_FAILURE() << "expected kiln::Error from: " #statement;                             \
    } catch (const ::kiln::Error& kiln_error_) {                                             \
      const std::string kiln_message_ = kiln_error_.what();                                  \
      for (const std::string& kiln_part_ : std::vector<std::string>{__VA_ARGS__}) {          \
        EXPECT_NE(kiln_message_.find(kiln_part_), std::string::npos)                         \
            << "message \"" << kiln_message_ << "\" lacks \"" << kiln_part_ << "\"";         \
      }                                                                                      \
    }                                                                                        \
  } while (0)
