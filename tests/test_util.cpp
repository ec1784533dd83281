// Shared test helpers (see test_util.h).
#include "tests/test_util.h"

#include <cmath>
#include <sstream>

namespace kiln::testing {

Tensor random_uniform(const std::vector<int64_t>& sizes, double low, double high, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor u = rand(sizes, {.dtype = DType::Float64}, &gen);
  return add(mul(u, high - low), low).to(dtype);
}

Tensor random_nonzero(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor magnitude = add(rand(sizes, {.dtype = DType::Float64}, &gen), 0.5);
  Tensor sign_bit = lt(rand(sizes, {.dtype = DType::Float64}, &gen), 0.5);
  return where(sign_bit, neg(magnitude), magnitude).to(dtype);
}

Tensor non_contiguous(const Tensor& t) {
  std::vector<int64_t> big = t.sizes();
  if (big.empty()) return t.clone();
  big.back() *= 2;
  Tensor buffer = full(big, 7, {.dtype = t.dtype(), .device = t.device()});
  Tensor view = buffer.slice(-1, 0, std::nullopt, 2);
  {
    NoGradGuard no_grad;
    view.copy_(t);
  }
  EXPECT_TRUE(!view.is_contiguous() || t.numel() <= 1);
  return view;
}

Tensor grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return random_nonzero(sizes, DType::Float64, seed).requires_grad_(true);
}

Tensor strided_grad_leaf(const std::vector<int64_t>& sizes, uint64_t seed) {
  return non_contiguous(random_nonzero(sizes, DType::Float64, seed)).detach().requires_grad_(true);
}

Tensor uniform_leaf(const std::vector<int64_t>& sizes, uint64_t seed, double low, double high) {
  Tensor x = random_uniform(sizes, low, high, DType::Float64, seed);
  return x.requires_grad_(true);
}

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {1e-12, 1e-10};
    case DType::Float32: return {1e-5, 1e-5};
    case DType::Float16: return {1e-3, 2e-3};
    case DType::BFloat16: return {1e-2, 1.6e-2};
    default: return {0.0, 0.0};
  }
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.sizes()) << " vs expected " << shape_str(expected.sizes());
  }
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (both_nan || same_inf) continue;
    if (!(std::abs(a[i] - e[i]) <= tol.atol + tol.rtol * std::abs(e[i]))) {
      return ::testing::AssertionFailure() << "element " << i << " (row-major) of shape " << shape_str(actual.sizes())
                                           << ": got " << a[i] << ", expected " << e[i] << " (atol " << tol.atol
                                           << ", rtol " << tol.rtol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected) {
  return all_close(actual, expected, tolerance_for(actual.dtype()));
}

::testing::AssertionResult all_equal(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << actual.dtype() << " vs expected " << expected.dtype();
  }
  return all_close(actual, expected, {0.0, 0.0});
}

}  // namespace kiln::testing
