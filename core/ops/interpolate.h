// Resampling a channels-first batch ([N, C, s...], 1 to 3 spatial dims) to a new size, as
// PyTorch's F.interpolate: mode Nearest (PyTorch's legacy "nearest": source index
// floor(i * scale)), NearestExact ("nearest-exact": floor((i + 0.5) * scale), the centre's
// nearest, what nnU-Net downsamples label maps with) or Linear (linear, bilinear or trilinear by the number
// of spatial dims), with align_corners. The output size is given (`size`) or computed from `scale_factor`
// (floor(in * factor)); as PyTorch without recompute_scale_factor, the source coordinates then use 1 /
// factor, not in / out.
//
// Linear is separable: each spatial dim in turn blends two gathered planes, each weighted
// along that dim, so the op is index_select, mul and add on any device and dtype, and its
// gradient is theirs (index_select's backward is a scatter-add). Nearest is one gather per
// dim. Coordinates with align_corners=False: (i + 0.5) * scale - 0.5, clamped at 0; with
// align_corners=True: i * (in - 1) / (out - 1).
//
//   interpolate(x, InterpolateOptions{.size = {64, 64, 64}, .mode = InterpolateMode::Linear});
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln {

enum class InterpolateMode { Nearest, NearestExact, Linear };

struct InterpolateOptions {
  std::vector<int64_t> size = {};         // output spatial size (one value: every dim)
  std::vector<double> scale_factor = {};  // or this per spatial dim (one value: every dim)
  InterpolateMode mode = InterpolateMode::Nearest;
  bool align_corners = false;  // Linear only, as in PyTorch
};

Tensor interpolate(const Tensor& input, const InterpolateOptions& options);

}  // namespace kiln
