// The formulas the U-Net fixtures share with their scripts (basic_unet/ and res_unet/
// make_fixtures.py, through formula_weights.py): inputs, output weights and parameters
// computed on both sides instead of stored, so the fixture files hold only the reference
// framework's results.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "core/ops.h"

namespace kiln::testing {

// f(scale i + phase) over the flat index i of `shape`, float64 (formula_weights.pattern).
inline Tensor formula_pattern(const std::vector<int64_t>& shape, double scale, double phase,
                              bool cosine = false) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = scale * static_cast<double>(i) + phase;
    v[static_cast<size_t>(i)] = cosine ? std::cos(x) : std::sin(x);
  }
  return tensor<double>(v, shape);
}

// A parameter from its name (formula_weights.weight): 0.3 sin(0.61 j + 0.1 (sum of the
// name's bytes mod 97)), plus 1 for a norm's weight (a name ending in `norm_weight_suffix`).
inline Tensor formula_weight(const std::string& key, const std::vector<int64_t>& shape,
                             const std::string& norm_weight_suffix) {
  int bytes = 0;
  for (unsigned char c : key) bytes += c;
  const Tensor w = mul(formula_pattern(shape, 0.61, 0.1 * (bytes % 97)), 0.3);
  return key.ends_with(norm_weight_suffix) ? add(w, 1.0) : w;
}

}  // namespace kiln::testing
