// Cropping a volume to its foreground (MONAI's CropForeground with select_fn x > threshold):
// the box around every voxel above the threshold in any channel of the source tensor,
// widened by `margin` voxels on each side; where the widened box passes the volume's edge
// the crop is padded with `value` (MONAI's allow_smaller=False). Every key is cropped to
// the same box, and the sample's metadata records it ("foreground_box": start and end per
// axis, on the uncropped grid) so that a prediction can be put back in place. A volume
// with no foreground is left whole (MONAI would crop it to nothing), its box the volume.
//
//   CropForeground(/*margin=*/{8, 8, 8})                 // image > 0, image and label
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "data/transforms.h"

namespace kiln::data {

struct ForegroundBox {
  std::array<int64_t, 3> start{}, end{};  // end exclusive; may lie outside the volume by the margin
};

// MONAI's generate_spatial_bounding_box(select_fn = x > threshold, margin, allow_smaller =
// false) of a [C, D, H, W] volume; nullopt-like empty box (start == end == 0) when nothing
// is above the threshold.
ForegroundBox foreground_box(const Tensor& volume, double threshold, const std::array<int64_t, 3>& margin);

// `t` [C, D, H, W] cut to `box`, padded with `value` where the box leaves it.
Tensor crop_or_pad(const Tensor& t, const ForegroundBox& box, double value);

class CropForeground final : public Transform {
 public:
  explicit CropForeground(std::array<int64_t, 3> margin = {0, 0, 0}, double threshold = 0.0,
                          Keys keys = {kImage, kLabel}, std::string source_key = kImage, double value = 0.0);
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "CropForeground"; }

 private:
  std::array<int64_t, 3> margin_;
  double threshold_;
  Keys keys_;
  std::string source_key_;
  double value_;
};

}  // namespace kiln::data
