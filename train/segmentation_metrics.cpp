// Segmentation metrics (segmentation_metrics.h): both masks are read to the host once as
// bytes [B, C, voxels]; the overlap metrics count, the distance metrics find each mask's
// surface, crop both to the box around their surfaces and measure with the exact distance
// transform of one surface sampled at the other's voxels.
#include "train/segmentation_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "train/distance_transform.h"

namespace kiln::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A binarised [B, C, d...] mask on the host.
struct Masks {
  int64_t batch = 0;
  int64_t classes = 0;
  std::vector<int64_t> spatial;
  int64_t voxels = 1;
  std::vector<uint8_t> bytes;
  const uint8_t* at(int64_t b, int64_t c) const { return bytes.data() + (b * classes + c) * voxels; }
};

Masks read_masks(const Tensor& t, const char* name, const char* op) {
  KILN_CHECK(t.defined(), op, ": undefined ", name);
  KILN_CHECK(t.dim() >= 3, op, ": ", name, " must be one-hot [B, C, d...], got shape ", t.sizes());
  Masks m;
  m.batch = t.size(0);
  m.classes = t.size(1);
  m.spatial.assign(t.sizes().begin() + 2, t.sizes().end());
  for (int64_t s : m.spatial) m.voxels *= s;
  m.bytes = ne(t.to(Device::cpu()), 0).to(DType::UInt8).contiguous().to_vector<uint8_t>();
  return m;
}

// Both masks, checked to have one shape.
std::pair<Masks, Masks> read_pair(const Tensor& y_pred, const Tensor& y, const char* op) {
  KILN_CHECK(y_pred.defined() && y.defined() && y_pred.sizes() == y.sizes(), op,
             ": y_pred and y must have the same shape, got ", y_pred.defined() ? y_pred.sizes() : Dims{},
             " and ", y.defined() ? y.sizes() : Dims{});
  return {read_masks(y_pred, "y_pred", op), read_masks(y, "y", op)};
}

// [B, C'] of `value(b, c)` for the classes kept.
Tensor per_class(const Masks& m, bool include_background,
                 const std::function<double(int64_t, int64_t)>& value) {
  const int64_t first = include_background ? 0 : std::min<int64_t>(1, m.classes);
  std::vector<double> out;
  for (int64_t b = 0; b < m.batch; ++b) {
    for (int64_t c = first; c < m.classes; ++c) out.push_back(value(b, c));
  }
  return tensor<double>(out, {m.batch, m.classes - first});
}

struct Counts {
  double pred = 0, truth = 0, both = 0;
};
Counts count(const uint8_t* p, const uint8_t* g, int64_t voxels) {
  Counts n;
  for (int64_t i = 0; i < voxels; ++i) {
    n.pred += p[i];
    n.truth += g[i];
    n.both += p[i] & g[i];
  }
  return n;
}

// MONAI's empty-mask rule for an overlap ratio (segmentation_metrics.h).
double overlap_ratio(double numerator, double denominator, const Counts& n, bool ignore_empty) {
  if (n.truth > 0) return numerator / denominator;
  if (ignore_empty) return kNaN;
  return n.pred > 0 ? 0.0 : 1.0;
}

std::vector<double> checked_spacing(const std::vector<double>& spacing, size_t dims, const char* op) {
  if (spacing.empty()) return std::vector<double>(dims, 1.0);
  KILN_CHECK(spacing.size() == dims, op, ": ", spacing.size(), " spacings for ", dims, " spatial dims");
  for (double s : spacing) KILN_CHECK(std::isfinite(s) && s > 0, op, ": spacing must be positive, got ", s);
  return spacing;
}

// Steps the row-major coordinate `coord` in a grid of `sizes` to the next voxel.
void next_coordinate(std::vector<int64_t>& coord, const std::vector<int64_t>& sizes) {
  for (size_t d = sizes.size(); d-- > 0;) {
    if (++coord[d] < sizes[d]) break;
    coord[d] = 0;
  }
}

// The voxels of `mask` with a face neighbour outside it (or on the grid's border): the
// mask minus its erosion by the face-connected cross (scipy's binary_erosion).
std::vector<uint8_t> surface(const uint8_t* mask, const std::vector<int64_t>& sizes, int64_t voxels) {
  std::vector<uint8_t> edge(static_cast<size_t>(voxels), 0);
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * sizes[d];
  std::vector<int64_t> coord(sizes.size(), 0);
  for (int64_t i = 0; i < voxels; ++i) {
    if (mask[i] != 0) {
      bool inner = true;
      for (size_t d = 0; d < sizes.size() && inner; ++d) {
        inner =
            coord[d] > 0 && coord[d] + 1 < sizes[d] && mask[i - strides[d]] != 0 && mask[i + strides[d]] != 0;
      }
      edge[static_cast<size_t>(i)] = inner ? 0 : 1;
    }
    next_coordinate(coord, sizes);
  }
  return edge;
}

// Distances from each voxel of surface `from` to the nearest voxel of surface `to`, in the
// order of `from`'s voxels; MONAI's infinities when either is empty.
std::vector<double> surface_distances(const std::vector<uint8_t>& from, const std::vector<uint8_t>& to,
                                      const std::vector<int64_t>& sizes, const std::vector<double>& spacing) {
  const auto n_from = std::count(from.begin(), from.end(), 1);
  const auto n_to = std::count(to.begin(), to.end(), 1);
  if (n_to == 0) return std::vector<double>(static_cast<size_t>(n_from), kInf);
  if (n_from == 0) return std::vector<double>(static_cast<size_t>(n_to), kInf);
  // The box around both surfaces holds every nearest voxel: transform only that.
  const size_t dims = sizes.size();
  std::vector<int64_t> lo(sizes), hi(dims, -1), coord(dims, 0);
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] || to[i]) {
      for (size_t d = 0; d < dims; ++d) {
        lo[d] = std::min(lo[d], coord[d]);
        hi[d] = std::max(hi[d], coord[d]);
      }
    }
    next_coordinate(coord, sizes);
  }
  std::vector<int64_t> box(dims);
  int64_t box_voxels = 1;
  for (size_t d = 0; d < dims; ++d) box_voxels *= (box[d] = hi[d] - lo[d] + 1);
  std::vector<uint8_t> sites(static_cast<size_t>(box_voxels));
  std::vector<int64_t> index_of_box(static_cast<size_t>(box_voxels));  // grid index of each box voxel
  std::fill(coord.begin(), coord.end(), 0);
  for (int64_t j = 0; j < box_voxels; ++j) {
    int64_t i = 0;
    for (size_t d = 0; d < dims; ++d) i = i * sizes[d] + lo[d] + coord[d];
    index_of_box[static_cast<size_t>(j)] = i;
    sites[static_cast<size_t>(j)] = to[static_cast<size_t>(i)];
    next_coordinate(coord, box);
  }
  const std::vector<double> squared = squared_distance_transform(sites, box, spacing);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(n_from));
  for (int64_t j = 0; j < box_voxels; ++j) {
    if (from[static_cast<size_t>(index_of_box[static_cast<size_t>(j)])]) {
      out.push_back(std::sqrt(squared[static_cast<size_t>(j)]));
    }
  }
  return out;
}

// torch.quantile's linear interpolation, in float64: rank q (n - 1) between the sorted
// neighbours (infinities give NaN, as MONAI's float32 torch.quantile).
double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double rank = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double weight = rank - static_cast<double>(below);
  const double a = values[below], b = values[above];
  return weight < 0.5 ? a + weight * (b - a) : b - (b - a) * (1.0 - weight);
}

// The directed distances of each class and sample, as `reduce` turns them into a value.
using Directions = std::vector<std::vector<double>>;
Tensor surface_metric(const Tensor& y_pred, const Tensor& y, bool include_background, bool symmetric,
                      const std::vector<double>& spacing_in, const char* op,
                      const std::function<double(const Directions&)>& reduce) {
  const std::pair<Masks, Masks> masks = read_pair(y_pred, y, op);  // named, not bound: lambdas capture them
  const Masks& pred = masks.first;
  const Masks& truth = masks.second;
  const std::vector<double> spacing = checked_spacing(spacing_in, pred.spatial.size(), op);
  return per_class(pred, include_background, [&](int64_t b, int64_t c) {
    const std::vector<uint8_t> p = surface(pred.at(b, c), pred.spatial, pred.voxels);
    const std::vector<uint8_t> g = surface(truth.at(b, c), truth.spatial, truth.voxels);
    Directions directions{surface_distances(p, g, pred.spatial, spacing)};
    if (symmetric) directions.push_back(surface_distances(g, p, pred.spatial, spacing));
    return reduce(directions);
  });
}

// A ratio of voxel counts per sample and class, MONAI's empty-mask rule applied:
// `ratio(counts)` gives (numerator, denominator).
Tensor overlap_metric(const Tensor& y_pred, const Tensor& y, const OverlapMetricOptions& options,
                      const char* op, const std::function<std::pair<double, double>(const Counts&)>& ratio) {
  const std::pair<Masks, Masks> masks = read_pair(y_pred, y, op);
  const Masks& pred = masks.first;
  const Masks& truth = masks.second;
  return per_class(pred, options.include_background, [&](int64_t b, int64_t c) {
    const Counts n = count(pred.at(b, c), truth.at(b, c), pred.voxels);
    const auto [numerator, denominator] = ratio(n);
    return overlap_ratio(numerator, denominator, n, options.ignore_empty);
  });
}

}  // namespace

Tensor compute_dice(const Tensor& y_pred, const Tensor& y, const OverlapMetricOptions& options) {
  return overlap_metric(y_pred, y, options, "compute_dice", [](const Counts& n) {
    return std::pair{2.0 * n.both, n.truth + n.pred};
  });
}

Tensor compute_iou(const Tensor& y_pred, const Tensor& y, const OverlapMetricOptions& options) {
  return overlap_metric(y_pred, y, options, "compute_iou", [](const Counts& n) {
    return std::pair{n.both, n.truth + n.pred - n.both};
  });
}

Tensor compute_hausdorff_distance(const Tensor& y_pred, const Tensor& y,
                                  const HausdorffDistanceOptions& options) {
  const char* op = "compute_hausdorff_distance";
  KILN_CHECK(!options.percentile || (*options.percentile >= 0 && *options.percentile <= 100), op,
             ": percentile must be in [0, 100], got ", options.percentile.value_or(0));
  return surface_metric(y_pred, y, options.include_background, !options.directed, options.spacing, op,
                        [&](const Directions& directions) {
                          double worst = -kInf;
                          for (const std::vector<double>& d : directions) {
                            double value = kNaN;
                            if (!d.empty()) {
                              value = options.percentile ? quantile(d, *options.percentile / 100.0)
                                                         : *std::max_element(d.begin(), d.end());
                            }
                            if (std::isnan(value)) return kNaN;  // torch.max propagates NaN
                            worst = std::max(worst, value);
                          }
                          return worst;
                        });
}

Tensor compute_average_surface_distance(const Tensor& y_pred, const Tensor& y,
                                        const SurfaceDistanceOptions& options) {
  return surface_metric(y_pred, y, options.include_background, options.symmetric, options.spacing,
                        "compute_average_surface_distance", [](const Directions& directions) {
                          double total = 0;
                          size_t count = 0;
                          for (const std::vector<double>& d : directions) {
                            for (double v : d) total += v;
                            count += d.size();
                          }
                          return count == 0 ? kNaN : total / static_cast<double>(count);
                        });
}

}  // namespace kiln::train
