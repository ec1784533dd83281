// Resampling (resample.h). resize is core's interpolate (separable: per axis a gather of
// the two neighbouring planes and a weighted sum) on a batch of one. affine_resample and
// displacement_resample are not separable: one sampler per mode, over any source map (an
// affine map, or one after a displacement), loops over output voxels, computes the 8
// corner offsets and weights once and applies them to every channel; the nearest mode
// gathers one voxel per output through index_select, which keeps any dtype.
#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/ops.h"

namespace kiln::data {
namespace {

void check_volume(const Tensor& volume, const char* op) {
  KILN_CHECK(volume.dim() == 4, op, ": a [C, D, H, W] volume is needed, got shape ", volume.sizes());
}

// The dtype linear interpolation returns: the input's floating dtype, else float32.
DType linear_result_dtype(DType dtype) { return is_floating(dtype) ? dtype : DType::Float32; }
DType linear_dtype(DType dtype) { return dtype == DType::Float64 ? DType::Float64 : DType::Float32; }

Tensor index_tensor(const std::vector<int64_t>& index) {
  return tensor(index, {static_cast<int64_t>(index.size())}, {.dtype = DType::Int64});
}

}  // namespace

Tensor resize(const Tensor& volume, const std::array<int64_t, 3>& size, Interpolation mode) {
  check_volume(volume, "resize");
  for (int axis = 0; axis < 3; ++axis) {
    KILN_CHECK(size[static_cast<size_t>(axis)] > 0, "resize: sizes must be positive, got [", size[0], ", ",
               size[1], ", ", size[2], "]");
    KILN_CHECK(volume.sizes()[static_cast<size_t>(axis) + 1] > 0,
               "resize: cannot resize the empty volume of shape ", volume.sizes());
  }
  // PyTorch's F.interpolate on a batch of one (core/ops/interpolate.h), which blends any
  // floating dtype (half types in float32); integer volumes become float32 first.
  const bool linear = mode == Interpolation::Linear;
  const Tensor x = linear && !volume.is_floating_point() ? volume.to(DType::Float32) : volume;
  return interpolate(x.unsqueeze(0), {.size = {size[0], size[1], size[2]},
                                      .mode = linear ? InterpolateMode::Linear : InterpolateMode::Nearest})
      .squeeze(0)
      .contiguous();
}

namespace {

// Where output voxel (z, y, x) reads the input: q = c + matrix (p - c + shift - offset),
// shift a displacement at p (0 for a plain affine map).
std::array<double, 3> source_of(const VoxelAffine& map, const std::array<double, 3>& centre, int64_t z,
                                int64_t y, int64_t x, const std::array<double, 3>& shift) {
  const double p[3] = {static_cast<double>(z) - centre[0] + shift[0] - map.offset[0],
                       static_cast<double>(y) - centre[1] + shift[1] - map.offset[1],
                       static_cast<double>(x) - centre[2] + shift[2] - map.offset[2]};
  std::array<double, 3> q{};
  for (int r = 0; r < 3; ++r) {
    q[static_cast<size_t>(r)] =
        centre[static_cast<size_t>(r)] + map.matrix[static_cast<size_t>(r)][0] * p[0] +
        map.matrix[static_cast<size_t>(r)][1] * p[1] + map.matrix[static_cast<size_t>(r)][2] * p[2];
  }
  return q;
}

// Trilinear sampling of `volume` at source(z, y, x) for every output voxel, 8-corner zero
// padding (grid_sample's); `source` returns (D, H, W) voxel coordinates.
template <typename T, typename Source>
Tensor sample_linear(const Tensor& volume, const Source& source) {
  const Tensor in = volume.contiguous();
  const int64_t channels = in.sizes()[0], d = in.sizes()[1], h = in.sizes()[2], w = in.sizes()[3];
  const int64_t voxels = d * h * w;
  Tensor out = zeros(in.sizes(), {.dtype = in.dtype()});
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const int64_t extent[3] = {d, h, w};
  for (int64_t z = 0; z < d; ++z) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const std::array<double, 3> q = source(z, y, x);
        // A map huge enough to overflow gives inf or NaN: that voxel reads nothing (0).
        if (!std::isfinite(q[0]) || !std::isfinite(q[1]) || !std::isfinite(q[2])) continue;
        int64_t base[3];
        double frac[3];
        for (int a = 0; a < 3; ++a) {
          const double floor_q = std::floor(q[static_cast<size_t>(a)]);
          base[a] = static_cast<int64_t>(std::clamp(floor_q, -2.0, static_cast<double>(extent[a]) + 1));
          frac[a] = q[static_cast<size_t>(a)] - floor_q;
        }
        const int64_t out_offset = (z * h + y) * w + x;
        for (int corner = 0; corner < 8; ++corner) {
          const int64_t i = base[0] + (corner >> 2 & 1), j = base[1] + (corner >> 1 & 1),
                        k = base[2] + (corner & 1);
          if (i < 0 || i >= d || j < 0 || j >= h || k < 0 || k >= w) continue;  // a zero corner
          const double weight = ((corner >> 2 & 1) ? frac[0] : 1 - frac[0]) *
                                ((corner >> 1 & 1) ? frac[1] : 1 - frac[1]) *
                                ((corner & 1) ? frac[2] : 1 - frac[2]);
          const int64_t in_offset = (i * h + j) * w + k;
          for (int64_t c = 0; c < channels; ++c) {
            dst[c * voxels + out_offset] +=
                static_cast<T>(weight * static_cast<double>(src[c * voxels + in_offset]));
          }
        }
      }
    }
  }
  return out;
}

// The input voxel nearest to source(z, y, x) for every output voxel (halves to even), 0
// outside; any dtype.
template <typename Source>
Tensor sample_nearest(const Tensor& volume, const Source& source) {
  const int64_t channels = volume.sizes()[0], d = volume.sizes()[1], h = volume.sizes()[2],
                w = volume.sizes()[3];
  std::vector<int64_t> index;
  std::vector<uint8_t> inside;
  index.reserve(static_cast<size_t>(d * h * w));
  for (int64_t z = 0; z < d; ++z) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const std::array<double, 3> q = source(z, y, x);
        const double i = std::nearbyint(q[0]), j = std::nearbyint(q[1]), k = std::nearbyint(q[2]);
        const bool in = std::isfinite(i) && std::isfinite(j) && std::isfinite(k) && i >= 0 &&
                        i < static_cast<double>(d) && j >= 0 && j < static_cast<double>(h) && k >= 0 &&
                        k < static_cast<double>(w);
        inside.push_back(in ? 1 : 0);
        index.push_back(
            in ? (static_cast<int64_t>(i) * h + static_cast<int64_t>(j)) * w + static_cast<int64_t>(k) : 0);
      }
    }
  }
  const Tensor gathered = index_select(volume.reshape({channels, d * h * w}), 1, index_tensor(index));
  const Tensor mask = tensor(inside, {1, d * h * w}, {.dtype = DType::UInt8}).to(DType::Bool);
  return where(mask, gathered, 0).reshape(volume.sizes()).contiguous();
}

// `volume` sampled through `source` in `mode` (the dtype rules of resample.h).
template <typename Source>
Tensor resample_through(const Tensor& volume, const Source& source, Interpolation mode) {
  if (volume.numel() == 0) return volume.clone();
  if (mode == Interpolation::Nearest) return sample_nearest(volume, source);
  const DType compute = linear_dtype(volume.dtype());
  const Tensor x = volume.to(compute);
  const Tensor out =
      compute == DType::Float64 ? sample_linear<double>(x, source) : sample_linear<float>(x, source);
  return out.to(linear_result_dtype(volume.dtype()));
}

std::array<double, 3> centre_of(const Tensor& volume) {
  return {(static_cast<double>(volume.size(1)) - 1) / 2, (static_cast<double>(volume.size(2)) - 1) / 2,
          (static_cast<double>(volume.size(3)) - 1) / 2};
}

}  // namespace

Tensor affine_resample(const Tensor& volume, const VoxelAffine& map, Interpolation mode) {
  check_volume(volume, "affine_resample");
  KILN_CHECK(volume.device().is_cpu(),
             "affine_resample: runs on CPU volumes (the loader's workers), got one on ", volume.device());
  for (const auto& row : map.matrix) {
    for (double v : row) KILN_CHECK(std::isfinite(v), "affine_resample: the matrix must be finite");
  }
  for (double v : map.offset) KILN_CHECK(std::isfinite(v), "affine_resample: the offset must be finite");
  const std::array<double, 3> centre = centre_of(volume);
  return resample_through(
      volume,
      [&](int64_t z, int64_t y, int64_t x) {
        return source_of(map, centre, z, y, x, {0, 0, 0});
      },
      mode);
}

Tensor displacement_resample(const Tensor& volume, const Tensor& displacement, const VoxelAffine& map,
                             Interpolation mode) {
  const char* op = "displacement_resample";
  check_volume(volume, op);
  KILN_CHECK(volume.device().is_cpu() && displacement.device().is_cpu(), op, ": runs on CPU volumes");
  KILN_CHECK(displacement.dim() == 4 && displacement.size(0) == 3 && displacement.size(1) == volume.size(1) &&
                 displacement.size(2) == volume.size(2) && displacement.size(3) == volume.size(3),
             op, ": the displacement must be [3, D, H, W] on the volume's grid ", volume.sizes(), ", got ",
             displacement.sizes());
  const std::vector<double> field = displacement.to(DType::Float64).contiguous().to_vector<double>();
  const int64_t voxels = volume.size(1) * volume.size(2) * volume.size(3);
  const int64_t h = volume.size(2), w = volume.size(3);
  const std::array<double, 3> centre = centre_of(volume);
  return resample_through(
      volume,
      [&](int64_t z, int64_t y, int64_t x) {
        const auto v = static_cast<size_t>((z * h + y) * w + x);
        return source_of(
            map, centre, z, y, x,
            {field[v], field[static_cast<size_t>(voxels) + v], field[2 * static_cast<size_t>(voxels) + v]});
      },
      mode);
}

}  // namespace kiln::data
