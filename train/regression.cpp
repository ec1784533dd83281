// regression_metrics (train/regression.h): in double on host copies.
#include "train/regression.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace kiln::train {

RegressionMetrics regression_metrics(const Tensor& y_true, const Tensor& y_pred) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const Tensor truth = y_true.dim() == 1 ? y_true.unsqueeze(1) : y_true;
  const Tensor pred = y_pred.dim() == 1 ? y_pred.unsqueeze(1) : y_pred;
  KILN_CHECK(truth.dim() == 2 && truth.sizes() == pred.sizes(), "regression metrics: ", y_true.sizes(),
             " targets for ", y_pred.sizes(), " predictions");
  const auto rows = static_cast<size_t>(truth.size(0)), columns = static_cast<size_t>(truth.size(1));
  if (rows == 0 || columns == 0) return {kNaN, kNaN, kNaN};
  const std::vector<double> t = truth.to(Device::cpu(), DType::Float64).contiguous().to_vector<double>();
  const std::vector<double> p = pred.to(Device::cpu(), DType::Float64).contiguous().to_vector<double>();
  double absolute = 0, squared = 0, r2 = 0;
  for (size_t c = 0; c < columns; ++c) {
    double mean = 0;
    for (size_t i = 0; i < rows; ++i) mean += t[i * columns + c];
    mean /= static_cast<double>(rows);
    double residual = 0, total = 0;
    for (size_t i = 0; i < rows; ++i) {
      const double y = t[i * columns + c], e = y - p[i * columns + c];
      absolute += std::abs(e);
      residual += e * e;
      total += (y - mean) * (y - mean);
    }
    squared += residual;
    r2 += total > 0 ? 1 - residual / total : residual == 0 ? 1.0 : 0.0;
  }
  const auto n = static_cast<double>(rows * columns);
  return {absolute / n, std::sqrt(squared / n), r2 / static_cast<double>(columns)};
}

}  // namespace kiln::train
