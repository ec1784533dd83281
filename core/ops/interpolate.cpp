// interpolate (interpolate.h): per spatial dim, the source taps (indices and weights)
// computed on the host with PyTorch's coordinate rules, then gathered and blended with
// core ops, so autograd and both backends come for free.
#include "core/ops/interpolate.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index.h"

namespace kiln {
namespace {

// Per spatial dim: the input size, the output size, and the scale the coordinates use
// (in / out, or 1 / scale_factor when a factor was given).
struct Axis {
  int64_t in, out;
  double scale;
};

std::vector<Axis> axes_of(const Tensor& input, const InterpolateOptions& o) {
  const int64_t spatial = input.dim() - 2;
  KILN_CHECK(spatial >= 1 && spatial <= 3,
             "interpolate: input must be [N, C, s...] with 1 to 3 spatial dims, got ", input.sizes());
  KILN_CHECK(o.size.empty() != o.scale_factor.empty(),
             "interpolate: give exactly one of size and scale_factor");
  KILN_CHECK(!o.align_corners || o.mode == InterpolateMode::Linear,
             "interpolate: align_corners applies to linear modes only");
  const auto pick = [](const auto& values, int64_t d) {
    return values.size() == 1 ? values[0] : values[static_cast<size_t>(d)];
  };
  const size_t given = o.size.empty() ? o.scale_factor.size() : o.size.size();
  KILN_CHECK(given == 1 || given == static_cast<size_t>(spatial), "interpolate: ", given,
             " sizes or factors for ", spatial, " spatial dims");
  std::vector<Axis> axes;
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t in = input.sizes()[static_cast<size_t>(d + 2)];
    KILN_CHECK(in > 0, "interpolate: cannot resample an empty spatial dim (input ", input.sizes(), ")");
    if (!o.size.empty()) {
      const int64_t out = pick(o.size, d);
      KILN_CHECK(out > 0, "interpolate: output sizes must be positive, got ", out);
      axes.push_back({in, out, static_cast<double>(in) / static_cast<double>(out)});
    } else {
      const double factor = pick(o.scale_factor, d);
      KILN_CHECK(std::isfinite(factor) && factor > 0, "interpolate: scale factors must be positive, got ",
                 factor);
      const double out = std::floor(static_cast<double>(in) * factor);
      KILN_CHECK(out >= 1 && out < 9.2e18, "interpolate: a factor of ", factor, " gives ", out,
                 " voxels from ", in);
      axes.push_back({in, static_cast<int64_t>(out), 1.0 / factor});
    }
  }
  return axes;
}

// The two source taps and weights of each output position along one axis.
struct Taps {
  std::vector<int64_t> low, high;
  std::vector<double> low_weight, high_weight;
};

Taps linear_taps(const Axis& a, bool align_corners) {
  Taps t;
  for (int64_t i = 0; i < a.out; ++i) {
    double source;
    if (align_corners) {
      source = a.out > 1
                   ? static_cast<double>(i) * static_cast<double>(a.in - 1) / static_cast<double>(a.out - 1)
                   : 0;
    } else {
      source = std::max(0.0, (static_cast<double>(i) + 0.5) * a.scale - 0.5);
    }
    const int64_t low = std::min(static_cast<int64_t>(source), a.in - 1);
    const double lambda = std::min(1.0, source - static_cast<double>(low));
    t.low.push_back(low);
    t.high.push_back(std::min(low + 1, a.in - 1));
    t.low_weight.push_back(1.0 - lambda);
    t.high_weight.push_back(lambda);
  }
  return t;
}

// PyTorch's legacy nearest: floor(i * scale) in float arithmetic, clamped.
std::vector<int64_t> nearest_taps(const Axis& a) {
  std::vector<int64_t> index;
  const auto scale = static_cast<float>(a.scale);
  for (int64_t i = 0; i < a.out; ++i) {
    index.push_back(std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * scale)), a.in - 1));
  }
  return index;
}

Tensor index_on(const std::vector<int64_t>& index, Device device) {
  return tensor(index, {static_cast<int64_t>(index.size())}, {.dtype = DType::Int64}).to(device);
}

// `values` shaped to broadcast along dim `dim` of a rank-`rank` tensor.
Tensor weights_along(const std::vector<double>& values, int64_t dim, int64_t rank, const Tensor& like) {
  std::vector<int64_t> sizes(static_cast<size_t>(rank), 1);
  sizes[static_cast<size_t>(dim)] = static_cast<int64_t>(values.size());
  return tensor(values, sizes).to(like.device(), like.dtype());
}

}  // namespace

Tensor interpolate(const Tensor& input, const InterpolateOptions& options) {
  const std::vector<Axis> axes = axes_of(input, options);
  const bool linear = options.mode == InterpolateMode::Linear;
  KILN_CHECK(!linear || input.is_floating_point(), "interpolate: linear modes need a floating input, got ",
             input.dtype());
  // Half types blend in float32, as PyTorch accumulates them.
  const bool widen = linear && (input.dtype() == DType::Float16 || input.dtype() == DType::BFloat16);
  Tensor x = widen ? input.to(DType::Float32) : input;
  for (size_t d = 0; d < axes.size(); ++d) {
    const auto dim = static_cast<int64_t>(d) + 2;
    if (!linear) {
      x = index_select(x, dim, index_on(nearest_taps(axes[d]), x.device()));
      continue;
    }
    const Taps t = linear_taps(axes[d], options.align_corners);
    x = add(
        mul(index_select(x, dim, index_on(t.low, x.device())), weights_along(t.low_weight, dim, x.dim(), x)),
        mul(index_select(x, dim, index_on(t.high, x.device())),
            weights_along(t.high_weight, dim, x.dim(), x)));
  }
  return widen ? x.to(input.dtype()) : x;
}

}  // namespace kiln
