// Elastic deformation with MONAI's definition (Rand3DElastic): a smooth random
// displacement field, optionally followed by a random affine map in the same resampling
// pass, moves every voxel, image and label by the same field
// (trilinear for images, nearest for label maps, 0 outside: MONAI's padding_mode="zeros").
//
//   displacement = magnitude x gaussian_smooth(noise, sigma, truncated = 3)
//   noise ~ U(-1, 1) per voxel and axis, [3, D, H, W]; sigma and magnitude drawn from their
//   ranges per sample. The output voxel p reads the input at p + displacement(p).
//
// Sigma sets how smooth the field is (voxels), magnitude how far it moves: smoothing
// shrinks U(-1, 1) noise to a spread of roughly 0.3 / sigma^1.5, so a magnitude of a few
// times sigma^1.5 moves voxels by about a voxel.
//
//   RandomElasticDeform({.sigma_range = {5, 7}, .magnitude_range = {50, 150}, .rotate_range = {0.2, 0.2,
//   0.2},
//                        .p = 0.2, .nearest_keys = {kLabel}})
#pragma once

#include <array>

#include "data/transforms.h"

namespace kiln::data {

// MONAI's field from its noise [3, D, H, W]: magnitude x smoothed noise (float32).
Tensor elastic_displacement(const Tensor& noise, double sigma, double magnitude);

// With probability p: the field drawn, then (MONAI's Rand3DElastic's affine part) an
// affine map drawn from RandomAffine's ranges, both applied in one resampling pass
// (displacement_resample): the content is warped, then scaled, rotated and moved.
class RandomElasticDeform final : public Transform {
 public:
  struct Options {
    std::array<double, 2> sigma_range{5.0, 7.0};         // voxels
    std::array<double, 2> magnitude_range{50.0, 150.0};  // voxels per unit of smoothed noise
    std::array<double, 3> rotate_range{0, 0, 0};         // radians, as RandomAffine
    std::array<double, 3> scale_range{0, 0, 0};
    std::array<double, 3> translate_range{0, 0, 0};  // voxels
    double p = 1.0;
    Keys keys = {kImage};
    Keys nearest_keys = {};
  };
  explicit RandomElasticDeform(Options options);
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomElasticDeform"; }

 private:
  Options options_;
};

}  // namespace kiln::data
