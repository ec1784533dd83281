// The exact Euclidean distance transform of a voxel grid with anisotropic spacing: for
// every voxel, the squared distance in millimetres to the nearest "site" voxel.
//
// Felzenszwalb & Huttenlocher's separable algorithm ("Distance Transforms of Sampled
// Functions", 2012): a squared Euclidean distance is a sum over the axes, so one pass per
// axis replaces each line's values f by min_q (s^2 (x - q)^2 + f(q)), the lower envelope of
// the parabolas rooted at the line's finite values, in O(n) per line. The result is exact
// (no chamfer approximation); voxels of a grid with no site are +inf.
//
//   std::vector<double> d2 = squared_distance_transform(sites, {D, H, W}, {2.5, 0.8, 0.8});
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::train {

// sites: one byte per voxel of the row-major grid `sizes` (non-zero: a site); spacing: the
// voxel size along each axis (positive).
std::vector<double> squared_distance_transform(const std::vector<uint8_t>& sites,
                                               const std::vector<int64_t>& sizes,
                                               const std::vector<double>& spacing);

}  // namespace kiln::train
