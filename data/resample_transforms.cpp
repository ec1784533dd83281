// The resampling transforms of data/transforms.h: Resize and RandomAffine, over
// data/resample.h. RandomAffine draws its angles, scales and translation once per sample
// (in that order, axis 0 first) and maps every key with the same draw.
#include <array>
#include <cmath>
#include <functional>

#include "core/error.h"
#include "data/transform_util.h"
#include "data/transforms.h"

namespace kiln::data {
namespace {

using Matrix = std::array<std::array<double, 3>, 3>;

Matrix multiply(const Matrix& a, const Matrix& b) {
  Matrix c{};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 3; ++j) c[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
  }
  return c;
}

// Rotation by `angle` in the plane of the two axes other than `axis`, from the first
// towards the second.
Matrix rotation(size_t axis, double angle) {
  Matrix r{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  const size_t a = axis == 0 ? 1 : 0, b = axis == 2 ? 1 : 2;
  r[a][a] = std::cos(angle);
  r[a][b] = -std::sin(angle);
  r[b][a] = std::sin(angle);
  r[b][b] = std::cos(angle);
  return r;
}

void apply_to_keys(Sample& sample, const Keys& keys, Interpolation mode, const std::string& transform,
                   const std::function<Tensor(const Tensor&, Interpolation)>& resample) {
  for (const std::string& key : keys) {
    Tensor& t = volume(sample, key, transform);
    t = resample(t, mode);
  }
}

}  // namespace

Resize::Resize(std::array<int64_t, 3> size, Keys keys, Keys nearest_keys)
    : size_(size), keys_(std::move(keys)), nearest_keys_(std::move(nearest_keys)) {
  for (int64_t s : size_)
    KILN_CHECK(s > 0, "Resize: sizes must be positive, got [", size_[0], ", ", size_[1], ", ", size_[2], "]");
}

void Resize::apply(Sample& sample, Generator&) const {
  const auto resample = [&](const Tensor& t, Interpolation mode) { return resize(t, size_, mode); };
  apply_to_keys(sample, keys_, Interpolation::Linear, "Resize", resample);
  apply_to_keys(sample, nearest_keys_, Interpolation::Nearest, "Resize", resample);
}

RandomAffine::RandomAffine(Options options) : options_(std::move(options)) {
  for (size_t a = 0; a < 3; ++a) {
    KILN_CHECK(
        options_.rotate_range[a] >= 0 && options_.translate_range[a] >= 0 && options_.scale_range[a] >= 0 &&
            options_.scale_range[a] < 1,
        "RandomAffine: ranges must be >= 0, and scale ranges < 1 (a scale of 1 - s must stay positive)");
  }
  KILN_CHECK(options_.p >= 0 && options_.p <= 1, "RandomAffine: p must be in [0, 1], got ", options_.p);
}

VoxelAffine RandomAffine::map_of(const std::array<double, 3>& angles, const std::array<double, 3>& scales,
                                 const std::array<double, 3>& translation) {
  // Forward: p = c + R S (q - c) + t with R = R0 R1 R2; the map reads q = c + S^-1 R^T (p - c - t).
  const Matrix r = multiply(multiply(rotation(0, angles[0]), rotation(1, angles[1])), rotation(2, angles[2]));
  VoxelAffine map;
  for (size_t i = 0; i < 3; ++i) {
    KILN_CHECK(scales[i] > 0, "RandomAffine: scales must be positive");
    for (size_t j = 0; j < 3; ++j) map.matrix[i][j] = r[j][i] / scales[i];
  }
  map.offset = translation;
  return map;
}

VoxelAffine RandomAffine::draw(const Options& options, Generator& generator) {
  std::array<double, 3> angles{}, scales{}, translation{};
  for (size_t a = 0; a < 3; ++a)
    angles[a] = uniform(generator, -options.rotate_range[a], options.rotate_range[a]);
  for (size_t a = 0; a < 3; ++a)
    scales[a] = 1 + uniform(generator, -options.scale_range[a], options.scale_range[a]);
  for (size_t a = 0; a < 3; ++a) {
    translation[a] = uniform(generator, -options.translate_range[a], options.translate_range[a]);
  }
  return map_of(angles, scales, translation);
}

void RandomAffine::apply(Sample& sample, Generator& generator) const {
  if (uniform(generator, 0, 1) >= options_.p) return;
  const VoxelAffine map = draw(options_, generator);
  const auto resample = [&](const Tensor& t, Interpolation mode) { return affine_resample(t, map, mode); };
  apply_to_keys(sample, options_.keys, Interpolation::Linear, "RandomAffine", resample);
  apply_to_keys(sample, options_.nearest_keys, Interpolation::Nearest, "RandomAffine", resample);
}

}  // namespace kiln::data
