// Smooth intensity changes of a volume with MONAI's definitions, for augmenting scans:
//
//   gaussian_smooth  MONAI's GaussianSmooth (approx "erf"): per spatial axis a kernel of
//                    taps w_i = (erf((i + 1/2) / (s sqrt 2)) - erf((i - 1/2) / (s sqrt 2))) / 2
//                    for |i| <= tail = int(max(t s, 0.5) + 0.5) (t = `truncated`, MONAI's 4),
//                    applied separably as a
//                    depthwise convolution with zero padding (the volume's size kept).
//   bias_field       MONAI's RandBiasField field: exp(sum_{i+j+k <= degree} c_ijk P_i(z)
//                    P_j(y) P_k(x)), Legendre polynomials P_n over coordinates spaced
//                    evenly in [-1, 1] along each axis, the coefficients in MONAI's order
//                    (i, then j, then k ascending), (degree + 1)(degree + 2)(degree + 3) / 6
//                    of them. The image is multiplied by it: an MRI scanner's slow
//                    intensity drift.
//
// The Random* transforms draw their parameters from the sample's generator (Note
// [Per-sample randomness]) and, like MONAI's, act with probability p.
//
//   RandomGaussianSmooth({0.5, 1.0}, 0.2)   // each axis' sigma ~ U(0.5, 1.0), p = 0.2
//   RandomBiasField(3, {0.0, 0.1}, 0.3)     // degree 3, coefficients ~ U(0, 0.1), p = 0.3
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "data/transforms.h"

namespace kiln::data {

// A [C, D, H, W] floating volume smoothed with `sigma` voxels per spatial axis (> 0).
Tensor gaussian_smooth(const Tensor& volume, const std::array<double, 3>& sigma, double truncated = 4.0);
// The multiplicative field exp(polynomial) of `shape` (D, H, W), float32.
Tensor bias_field(const std::array<int64_t, 3>& shape, int64_t degree,
                  const std::vector<double>& coefficients);
// How many coefficients a field of `degree` has in 3-D.
int64_t bias_field_coefficients(int64_t degree);

class RandomGaussianSmooth final : public Transform {
 public:
  RandomGaussianSmooth(std::array<double, 2> sigma_range, double p, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomGaussianSmooth"; }

 private:
  std::array<double, 2> sigma_range_;
  double p_;
  Keys keys_;
};

class RandomBiasField final : public Transform {
 public:
  RandomBiasField(int64_t degree, std::array<double, 2> coefficient_range, double p, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomBiasField"; }

 private:
  int64_t degree_;
  std::array<double, 2> range_;
  double p_;
  Keys keys_;
};

}  // namespace kiln::data
