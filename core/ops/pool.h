// Pooling over 1, 2 or 3 spatial dims, channels first ([N, C, s...] or unbatched
// [C, s...]), as PyTorch's: max (with the argmax indices), average, and adaptive average.
// kernel_size, stride, padding and dilation take one value per spatial dim or a single
// value for all; an empty stride means stride = kernel_size.
// Gradient: max routes grad_out to the argmax of each window, average spreads it evenly.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "core/tensor.h"

namespace kiln {

Tensor max_pool1d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {}, const std::vector<int64_t>& padding = {0},
                  const std::vector<int64_t>& dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {}, const std::vector<int64_t>& padding = {0},
                  const std::vector<int64_t>& dilation = {1}, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {}, const std::vector<int64_t>& padding = {0},
                  const std::vector<int64_t>& dilation = {1}, bool ceil_mode = false);
// The pooled values and, for each, the flat index of its max within the input's spatial
// volume (Int64, PyTorch's return_indices), over spatial_dims = 1, 2 or 3 trailing dims.
std::tuple<Tensor, Tensor> max_pool_with_indices(const Tensor& input, int64_t spatial_dims,
                                                 const std::vector<int64_t>& kernel_size,
                                                 const std::vector<int64_t>& stride = {},
                                                 const std::vector<int64_t>& padding = {0},
                                                 const std::vector<int64_t>& dilation = {1},
                                                 bool ceil_mode = false);

Tensor avg_pool1d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {}, const std::vector<int64_t>& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {}, const std::vector<int64_t>& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor avg_pool3d(const Tensor& input, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride = {}, const std::vector<int64_t>& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

// output_size: one value per spatial dim or a single value for all.
Tensor adaptive_avg_pool1d(const Tensor& input, const std::vector<int64_t>& output_size);
Tensor adaptive_avg_pool2d(const Tensor& input, const std::vector<int64_t>& output_size);
Tensor adaptive_avg_pool3d(const Tensor& input, const std::vector<int64_t>& output_size);

}  // namespace kiln
