// SyntheticShapes (data/synthetic.h): five uniform draws place and size the shape (at
// side 16: radius 3 to 5 voxels, centre 5.5 to 10.5 on each axis; both scale with the
// side), then one normal draw per voxel is the noise. SyntheticSegmentation: the same
// shapes, five draws each (class, radius, centre), painted into a label map.
#include "data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "data/transforms.h"  // sample_generator

namespace kiln::data {
namespace {

// Whether voxel (z, y, x) is inside a shape of class `label` centred at c with size r.
bool inside(int64_t label, const double c[3], double r, double scale, int64_t z, int64_t y, int64_t x) {
  const double d[3] = {std::abs(static_cast<double>(z) - c[0]), std::abs(static_cast<double>(y) - c[1]),
                       std::abs(static_cast<double>(x) - c[2])};
  switch (label) {
    case 0:
      return d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= r * r;  // ball
    case 1:
      return d[0] <= 0.8 * r && d[1] <= 0.8 * r && d[2] <= 0.8 * r;  // cube
    default: {  // jack: inside at least two of the three thin bars' cross-sections
      const double arm = 1.2 * scale;
      const int thin = (d[0] <= arm) + (d[1] <= arm) + (d[2] <= arm);
      return thin >= 2 && d[0] <= r + scale && d[1] <= r + scale && d[2] <= r + scale;
    }
  }
}

}  // namespace

SyntheticShapes::SyntheticShapes(const SyntheticShapesOptions& options) : options_(options) {
  KILN_CHECK(options_.size >= 0, "SyntheticShapes: size must be >= 0, got ", options_.size);
  KILN_CHECK(options_.side >= 8, "SyntheticShapes: side must be >= 8, got ", options_.side);
  KILN_CHECK(options_.noise >= 0, "SyntheticShapes: noise must be >= 0, got ", options_.noise);
}

Sample SyntheticShapes::get(int64_t index) const {
  check_index(index);
  Generator generator = sample_generator(options_.seed, 0, index);
  const int64_t side = options_.side, voxels = side * side * side;
  const double scale = static_cast<double>(side) / 16.0;
  const std::vector<double> p = rand({5}, {.dtype = DType::Float64}, &generator).to_vector<double>();
  const int64_t label = std::min<int64_t>(kClasses - 1, static_cast<int64_t>(p[0] * kClasses));
  const double r = scale * (3.0 + 2.0 * p[1]);
  const double c[3] = {scale * (5.5 + 5.0 * p[2]), scale * (5.5 + 5.0 * p[3]), scale * (5.5 + 5.0 * p[4])};
  std::vector<float> values = randn({voxels}, {}, &generator).to_vector<float>();
  for (int64_t z = 0, i = 0; z < side; ++z) {
    for (int64_t y = 0; y < side; ++y) {
      for (int64_t x = 0; x < side; ++x, ++i) {
        const float signal = inside(label, c, r, scale, z, y, x) ? 1.0f : 0.0f;
        values[static_cast<size_t>(i)] =
            signal + static_cast<float>(options_.noise) * values[static_cast<size_t>(i)];
      }
    }
  }
  return {.tensors = {{kImage, tensor(values, {1, side, side, side})},
                      {kLabel, full({}, label, {.dtype = DType::Int64})}},
          .metadata = {}};
}

SyntheticSegmentation::SyntheticSegmentation(const SyntheticSegmentationOptions& options)
    : options_(options) {
  const char* op = "SyntheticSegmentation";
  KILN_CHECK(options_.size >= 0, op, ": size must be >= 0, got ", options_.size);
  for (int64_t s : options_.shape)
    KILN_CHECK(s >= 8 && s <= 4096, op, ": each dim must be in [8, 4096], got ", s);
  KILN_CHECK(options_.classes >= 1, op, ": classes must be >= 1, got ", options_.classes);
  KILN_CHECK(options_.shapes >= 0, op, ": shapes must be >= 0, got ", options_.shapes);
  KILN_CHECK(options_.noise >= 0, op, ": noise must be >= 0, got ", options_.noise);
}

Sample SyntheticSegmentation::get(int64_t index) const {
  check_index(index);
  Generator generator = sample_generator(options_.seed, 0, index);
  const auto [depth, height, width] = options_.shape;
  const int64_t voxels = depth * height * width;
  const double scale = static_cast<double>(std::min({depth, height, width})) / 16.0;
  std::vector<int64_t> labels(static_cast<size_t>(voxels), 0);
  for (int64_t k = 0; k < options_.shapes; ++k) {
    const std::vector<double> p = rand({5}, {.dtype = DType::Float64}, &generator).to_vector<double>();
    const int64_t label =
        1 + std::min<int64_t>(options_.classes - 1, static_cast<int64_t>(p[0] * options_.classes));
    const double r = scale * (2.0 + 2.0 * p[1]);
    double c[3];
    for (int axis = 0; axis < 3; ++axis) {
      const auto n = static_cast<double>(options_.shape[static_cast<size_t>(axis)]);
      c[axis] = r + (n - 1 - 2 * r) * p[static_cast<size_t>(axis) + 2];
    }
    for (int64_t z = 0, i = 0; z < depth; ++z) {
      for (int64_t y = 0; y < height; ++y) {
        for (int64_t x = 0; x < width; ++x, ++i) {
          if (inside((label - 1) % 3, c, r, scale, z, y, x)) labels[static_cast<size_t>(i)] = label;
        }
      }
    }
  }
  std::vector<float> values = randn({voxels}, {}, &generator).to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    const float signal = labels[i] == 0 ? 0.0F : 0.5F + 0.5F * static_cast<float>(labels[i]);
    values[i] = signal + static_cast<float>(options_.noise) * values[i];
  }
  return {.tensors = {{kImage, tensor(values, {1, depth, height, width})},
                      {kLabel, tensor(labels, {1, depth, height, width})}},
          .metadata = {}};
}

}  // namespace kiln::data
