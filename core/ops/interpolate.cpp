// interpolate (interpolate.h): per spatial dim, the source taps (indices and weights)
// computed on the input's device with PyTorch's coordinate rules, then gathered and
// blended with core ops, so autograd and both backends come for free.
#include "core/ops/interpolate.h"

#include <algorithm>
#include <cmath>
#include <optional>

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

// The taps are made on the input's device with core ops (an arange and elementwise
// arithmetic), so resampling a GPU tensor copies nothing from the host: a host-made index
// would be a pageable host-to-device copy, which waits for the device, on every call.
// Every value is rounded as PyTorch rounds it (one IEEE operation per step; the
// coordinates are >= 0, so the cast to Int64 is their floor).

// The two source taps of each output position along one axis, and their weights.
struct Taps {
  Tensor low, high;                // Int64 [out]
  Tensor low_weight, high_weight;  // Float64 [out]
};

Taps linear_taps(const Axis& a, bool align_corners, Device device) {
  const Tensor i = arange(a.out, {.dtype = DType::Float64, .device = device});
  Tensor source;
  if (align_corners) {  // i * (in - 1) / (out - 1), the ratio first, as PyTorch
    source = mul(i, a.out > 1 ? static_cast<double>(a.in - 1) / static_cast<double>(a.out - 1) : 0.0);
  } else {  // (i + 0.5) * scale - 0.5, clamped at 0
    source = clamp(sub(mul(add(i, 0.5), a.scale), 0.5), 0.0, std::nullopt);
  }
  const Tensor low = clamp(source.to(DType::Int64), std::nullopt, a.in - 1);
  const Tensor lambda = clamp(sub(source, low.to(DType::Float64)), std::nullopt, 1.0);
  return {.low = low,
          .high = clamp(add(low, 1), std::nullopt, a.in - 1),
          .low_weight = add(neg(lambda), 1.0),
          .high_weight = lambda};
}

// PyTorch's legacy nearest, floor(i * scale), or nearest-exact, floor((i + 0.5) * scale),
// in float arithmetic, clamped.
Tensor nearest_taps(const Axis& a, bool exact, Device device) {
  Tensor i = arange(a.out, {.dtype = DType::Float32, .device = device});
  if (exact) i = add(i, 0.5);
  const Tensor source = mul(i, static_cast<double>(static_cast<float>(a.scale)));
  return clamp(source.to(DType::Int64), std::nullopt, a.in - 1);
}

// `weights` [out] shaped to broadcast along dim `dim` of `like`, in its dtype.
Tensor along(const Tensor& weights, int64_t dim, const Tensor& like) {
  std::vector<int64_t> sizes(static_cast<size_t>(like.dim()), 1);
  sizes[static_cast<size_t>(dim)] = weights.numel();
  return weights.reshape(sizes).to(like.dtype());
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
      x = index_select(x, dim,
                       nearest_taps(axes[d], options.mode == InterpolateMode::NearestExact, x.device()));
      continue;
    }
    const Taps t = linear_taps(axes[d], options.align_corners, x.device());
    x = add(mul(index_select(x, dim, t.low), along(t.low_weight, dim, x)),
            mul(index_select(x, dim, t.high), along(t.high_weight, dim, x)));
  }
  return widen ? x.to(input.dtype()) : x;
}

}  // namespace kiln
