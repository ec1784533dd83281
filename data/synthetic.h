// Synthetic 3D volumes, so that everything runs without a download: each sample is a
// single-channel cube of side^3 voxels holding one solid shape, a ball, a cube or a jack
// (three orthogonal bars), of random size and position, plus Gaussian noise. Label 0, 1
// or 2. Sample i is drawn from sample_generator(seed, 0, i) (data/transforms.h), so get(i)
// depends on the options and i alone: thread-safe, and the same in any order.
//
// SyntheticSegmentation: volumes of any size holding a few of those shapes, each a class
// 1..classes (ball, cube, jack, ball, ... by class) at intensity 0.5 + 0.5 class, in
// Gaussian noise, with the label map that marks them (a later shape covers an earlier
// one); for segmentation tests and the demo.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace kiln::data {

struct SyntheticShapesOptions {
  int64_t size = 768;   // samples
  int64_t side = 16;    // voxels per edge
  double noise = 0.35;  // standard deviation of the noise added to the 0/1 shape
  uint64_t seed = 0;
};

class SyntheticShapes final : public Dataset {
 public:
  static constexpr int64_t kClasses = 3;  // ball, cube, jack
  explicit SyntheticShapes(const SyntheticShapesOptions& options = {});
  int64_t size() const override { return options_.size; }
  // "image": float32 [1, side, side, side]; "label": the class, an int64 scalar.
  Sample get(int64_t index) const override;
  std::string name() const override { return "SyntheticShapes"; }

 private:
  SyntheticShapesOptions options_;
};

struct SyntheticSegmentationOptions {
  int64_t size = 64;                            // samples
  std::array<int64_t, 3> shape = {32, 32, 32};  // D, H, W of each volume
  int64_t classes = 2;                          // foreground classes (labels 1..classes)
  int64_t shapes = 3;                           // shapes per volume
  double noise = 0.35;
  uint64_t seed = 0;
};

class SyntheticSegmentation final : public Dataset {
 public:
  explicit SyntheticSegmentation(const SyntheticSegmentationOptions& options = {});
  int64_t size() const override { return options_.size; }
  // "image": float32 [1, D, H, W]; "label": int64 [1, D, H, W] in 0..classes.
  Sample get(int64_t index) const override;
  std::string name() const override { return "SyntheticSegmentation"; }

 private:
  SyntheticSegmentationOptions options_;
};

}  // namespace kiln::data
