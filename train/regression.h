// The metrics of a regression (one's own scans, --task regression), as scikit-learn defines
// them (sklearn.metrics: mean_absolute_error, root of mean_squared_error, r2_score with
// multioutput="uniform_average"): over every target value, or per target and averaged.
//
//   MAE   mean |y - p| over all N x T values
//   RMSE  sqrt(mean (y - p)^2) over all values
//   R2    1 - sum (y - p)^2 / sum (y - mean y)^2 per target, averaged over targets; a
//         target that is constant in y scores 1 when predicted exactly, else 0 (sklearn's
//         convention), so a tiny split cannot produce an infinity
//
//   const RegressionMetrics m = regression_metrics(targets, predictions);  // [N, T] or [N]
#pragma once

#include "core/tensor.h"

namespace kiln::train {

struct RegressionMetrics {
  double mae, rmse, r2;
};

// NaN for every metric when there are no samples; shapes must agree ([N] is [N, 1]).
RegressionMetrics regression_metrics(const Tensor& y_true, const Tensor& y_pred);

}  // namespace kiln::train
