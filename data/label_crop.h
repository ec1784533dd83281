// Crops centred on chosen labels, for training on patches of large volumes where the
// structure of interest is small: MONAI's RandCropByPosNegLabel (a foreground voxel,
// label > 0, with probability pos / (pos + neg), else a background one) and
// RandCropByLabelClasses (a voxel of class c with probability ratio_c / sum of ratios).
// The centre is drawn uniformly among the chosen group's voxels of the label map, then
// moved as MONAI's correct_crop_centers does so that the box lies inside the volume; every
// key is cropped to the same box. A group with no voxel gets probability 0 (an all-
// background label map gives background crops); a volume smaller than the box is an error
// (pad it first: data::Pad).
//
//   RandomCropByLabel::pos_neg({96, 96, 96}, 1.0, 1.0)           // MONAI's pos=1, neg=1
//   RandomCropByLabel::classes({64, 64, 64}, {1.0, 2.0, 2.0})    // per class 0, 1, 2
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "data/transforms.h"

namespace kiln::data {

class RandomCropByLabel final : public Transform {
 public:
  static RandomCropByLabel pos_neg(std::array<int64_t, 3> size, double pos, double neg,
                                   Keys keys = {kImage, kLabel}, std::string label_key = kLabel);
  static RandomCropByLabel classes(std::array<int64_t, 3> size, std::vector<double> ratios,
                                   Keys keys = {kImage, kLabel}, std::string label_key = kLabel);
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomCropByLabel"; }

 private:
  RandomCropByLabel(std::array<int64_t, 3> size, std::vector<double> ratios, bool by_class, Keys keys,
                    std::string label_key);
  std::array<int64_t, 3> size_;
  std::vector<double> ratios_;  // pos_neg: {neg, pos} (groups background, foreground); classes: one per class
  bool by_class_;
  Keys keys_;
  std::string label_key_;
};

// MONAI's correct_crop_centers: `center` moved into [size / 2, shape + 1 - size / 2)
// (the end truncated, and one past the start when they meet), so that the box of `size`
// starting at center - size / 2 lies inside `shape`.
std::array<int64_t, 3> corrected_crop_center(const std::array<int64_t, 3>& center,
                                             const std::array<int64_t, 3>& size,
                                             const std::array<int64_t, 3>& shape);

}  // namespace kiln::data
