// squared_distance_transform (distance_transform.h): the sites start at 0 and every other
// voxel at +inf; then each axis in turn, each line of it through the 1-D lower envelope.
#include "train/distance_transform.h"

#include <cstddef>
#include <limits>
#include <optional>

#include "core/checked_math.h"
#include "core/error.h"

namespace kiln::train {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One line: out[x] = min_q (weight (x - q)^2 + f[q]) over the q with a finite f[q].
// `roots` and `bounds` are scratch of n and n + 1 entries: the envelope's parabolas, in
// order, and where each takes over from the one before.
void envelope_1d(const double* f, int64_t n, double weight, double* out, int64_t* roots, double* bounds) {
  int64_t k = -1;
  for (int64_t q = 0; q < n; ++q) {
    if (f[q] == kInf) continue;
    const double fq = f[q] + weight * static_cast<double>(q) * static_cast<double>(q);
    double s = -kInf;
    while (k >= 0) {
      const int64_t v = roots[k];
      const double fv = f[v] + weight * static_cast<double>(v) * static_cast<double>(v);
      s = (fq - fv) / (2.0 * weight * static_cast<double>(q - v));
      if (s > bounds[k]) break;
      --k;
    }
    ++k;
    roots[k] = q;
    bounds[k] = k == 0 ? -kInf : s;
    bounds[k + 1] = kInf;
  }
  if (k < 0) {
    for (int64_t x = 0; x < n; ++x) out[x] = kInf;
    return;
  }
  int64_t j = 0;
  for (int64_t x = 0; x < n; ++x) {
    while (bounds[j + 1] < static_cast<double>(x)) ++j;
    const double d = static_cast<double>(x - roots[j]);
    out[x] = weight * d * d + f[roots[j]];
  }
}

}  // namespace

std::vector<double> squared_distance_transform(const std::vector<uint8_t>& sites,
                                               const std::vector<int64_t>& sizes,
                                               const std::vector<double>& spacing) {
  const char* op = "squared_distance_transform";
  KILN_CHECK(spacing.size() == sizes.size(), op, ": ", spacing.size(), " spacings for a grid of ",
             sizes.size(), " axes");
  int64_t total = 1;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, op, ": negative size ", s);
    const std::optional<int64_t> product = checked_mul(total, s);
    KILN_CHECK(product.has_value(), op, ": the grid ", sizes, " has more voxels than int64 holds");
    total = *product;
  }
  for (double s : spacing)
    KILN_CHECK(s > 0 && s < kInf, op, ": spacing must be positive and finite, got ", s);
  KILN_CHECK(static_cast<int64_t>(sites.size()) == total, op, ": ", sites.size(), " sites for ", total,
             " voxels");
  std::vector<double> values(sites.size());
  for (size_t i = 0; i < sites.size(); ++i) values[i] = sites[i] != 0 ? 0.0 : kInf;
  if (total == 0) return values;

  int64_t stride = total;
  for (size_t axis = 0; axis < sizes.size(); ++axis) {
    const int64_t n = sizes[axis];
    stride /= n;  // the axis' stride in the row-major grid
    std::vector<double> line(static_cast<size_t>(n)), out(static_cast<size_t>(n)),
        bounds(static_cast<size_t>(n) + 1);
    std::vector<int64_t> roots(static_cast<size_t>(n));
    const double weight = spacing[axis] * spacing[axis];
    const int64_t block = n * stride;  // lines start at (outer * block + inner)
    for (int64_t outer = 0; outer < total; outer += block) {
      for (int64_t inner = 0; inner < stride; ++inner) {
        double* base = values.data() + outer + inner;
        for (int64_t x = 0; x < n; ++x) line[static_cast<size_t>(x)] = base[x * stride];
        envelope_1d(line.data(), n, weight, out.data(), roots.data(), bounds.data());
        for (int64_t x = 0; x < n; ++x) base[x * stride] = out[static_cast<size_t>(x)];
      }
    }
  }
  return values;
}

}  // namespace kiln::train
