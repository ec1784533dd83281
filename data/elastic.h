// Elastic deformation with MONAI's definition (Rand3DElastic without its affine part): a
// smooth random displacement field moves every voxel, image and label by the same field
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
//   RandomElasticDeform({5.0, 7.0}, {50.0, 150.0}, 0.2, {kImage}, {kLabel})
#pragma once

#include <array>

#include "data/transforms.h"

namespace kiln::data {

// MONAI's field from its noise [3, D, H, W]: magnitude x smoothed noise (float32).
Tensor elastic_displacement(const Tensor& noise, double sigma, double magnitude);

class RandomElasticDeform final : public Transform {
 public:
  RandomElasticDeform(std::array<double, 2> sigma_range, std::array<double, 2> magnitude_range, double p,
                      Keys keys = {kImage}, Keys nearest_keys = {});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomElasticDeform"; }

 private:
  std::array<double, 2> sigma_range_, magnitude_range_;
  double p_;
  Keys keys_, nearest_keys_;
};

}  // namespace kiln::data
