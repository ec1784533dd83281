// Unary elementwise ops against a naive float64 reference, shared by test_elementwise.cpp
// and test_activation.cpp: a case is an op, its reference and the input range it is
// checked on; each case runs in every float dtype on random contiguous, non-contiguous and
// transposed inputs, and must match the reference computed in double within the dtype's
// tolerance (tests/test_util.h).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln::testing {

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double low, high;  // input domain
};

inline constexpr DType kUnaryCaseDtypes[] = {DType::Float64, DType::Float32, DType::Float16, DType::BFloat16};

// Applies `ref` elementwise in double to the row-major values of x (the naive reference).
inline Tensor reference_unary(const Tensor& x, const std::function<double(double)>& ref, DType out_dtype) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = ref(e);
  return tensor(v, x.sizes()).to(out_dtype);
}

inline void expect_unary_cases_match_reference(const std::vector<UnaryCase>& cases) {
  for (const UnaryCase& c : cases) {
    for (DType dtype : kUnaryCaseDtypes) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dtype)));
      const Tensor x = random_uniform({3, 7, 5}, c.low, c.high, dtype, 7);
      const Tensor expected = reference_unary(x, c.ref, dtype);
      EXPECT_TRUE(all_close(c.op(x), expected));
      const Tensor xt = non_contiguous(x);
      EXPECT_TRUE(all_close(c.op(xt), expected));
      EXPECT_TRUE(all_close(c.op(x.transpose(0, 2)), expected.transpose(0, 2).contiguous()));
    }
  }
}

}  // namespace kiln::testing
