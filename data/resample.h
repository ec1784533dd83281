// Resampling [C, D, H, W] volumes on a new grid: the arithmetic behind the Resize and
// RandomAffine transforms (data/transforms.h), usable on its own.
//
// Linear interpolation is trilinear: each output voxel blends the 8 input voxels around
// the point it maps to. It returns the input's floating dtype (float16/bfloat16 computed
// in float32), or float32 for integer volumes. Nearest picks one input voxel and keeps the
// dtype, for label maps, where blending class numbers would invent classes.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace kiln::data {

enum class Interpolation { Linear, Nearest };

// The volume on a grid of `size` voxels spanning the same extent, exactly as PyTorch's
// F.interpolate(size=size, mode="trilinear", align_corners=False) (voxel centres map
// through (i + 0.5) * in / out - 0.5, clamped to the volume) or mode="nearest" (input
// voxel floor(i * in / out), PyTorch's legacy nearest).
Tensor resize(const Tensor& volume, const std::array<int64_t, 3>& size, Interpolation mode);

// An affine map of voxel coordinates, (D, H, W) order, about the volume's centre
// c = (n - 1) / 2 per axis: the output voxel p reads the input at
//   q = c + matrix (p - c - offset).
// RandomAffine's rotation R, scales S and translation t give matrix = S^-1 R^T and
// offset = t: the content is scaled, rotated about the centre, then moved by t.
struct VoxelAffine {
  std::array<std::array<double, 3>, 3> matrix{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  std::array<double, 3> offset{0, 0, 0};
};

// The volume resampled on its own grid through `map`. Linear: trilinear, each of the 8
// corners that falls outside the volume counts as 0 (PyTorch's grid_sample with
// padding_mode="zeros"; with align_corners=True on a cube it is this same map). Nearest:
// the input voxel nearest to q (halves round to even), 0 outside.
Tensor affine_resample(const Tensor& volume, const VoxelAffine& map, Interpolation mode);

// The volume resampled through a displacement field and then `map`, in one pass: the
// output voxel p reads the input at q = c + matrix (p - c + displacement(p) - offset),
// displacement [3, D, H, W] in voxels ((D, H, W) order) on the volume's grid (MONAI's
// Rand3DElastic: the offset added to the grid, then its affine). Interpolation and
// padding as affine_resample.
Tensor displacement_resample(const Tensor& volume, const Tensor& displacement, const VoxelAffine& map,
                             Interpolation mode);

}  // namespace kiln::data
