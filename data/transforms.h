// 3D transforms: what turns a dataset's sample into a training input, run on the loader's
// worker threads on CPU tensors. A transform changes a Sample in place, acting on the
// tensors named by its `keys` (default "image"; a spatial transform given {"image",
// "label"} moves a segmentation mask with its image by the same random draw). Volumes
// are channel-first, [C, D, H, W]: spatial axes 0, 1, 2 are the tensor's dims 1, 2, 3.
//
// Note [Per-sample randomness]: a random transform draws only from the Generator it is
// handed, and the loader hands each sample sample_generator(seed, epoch, index), a
// generator seeded from those three numbers alone. So a sample's augmentation depends on
// nothing else: not on the worker that ran it, nor on the samples before it, and a run is
// reproducible whatever the number of workers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "data/dataset.h"
#include "data/resample.h"

namespace kiln::data {

// The generator of sample `index` in `epoch` of a run seeded with `seed` (a splitmix64
// mix of the three, so neighbouring indices get unrelated streams).
Generator sample_generator(uint64_t seed, int64_t epoch, int64_t index);

class Transform {
 public:
  virtual ~Transform() = default;
  virtual void apply(Sample& sample, Generator& generator) const = 0;
  virtual std::string name() const = 0;
};
using TransformPtr = std::shared_ptr<const Transform>;

using Keys = std::vector<std::string>;

// Each transform in turn.
class Compose final : public Transform {
 public:
  explicit Compose(std::vector<TransformPtr> transforms);
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override;

 private:
  std::vector<TransformPtr> transforms_;
};

// x -> float32(x) * scale (MedMNIST divides its uint8 volumes by 255).
class ToFloat final : public Transform {
 public:
  explicit ToFloat(double scale = 1.0, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "ToFloat"; }

 private:
  double scale_;
  Keys keys_;
};

// Intensity normalisation of each sample on its own:
//   ZScore: (x - mean) / std (the sample's own, or given ones); a constant volume -> 0.
//   MinMax: (x - min) / (max - min) into [0, 1]; a constant volume -> 0.
//   Window: clip to [low, high], then (x - low) / (high - low) (a CT window in HU).
class Normalize final : public Transform {
 public:
  enum class Mode { ZScore, MinMax, Window };
  static Normalize zscore(Keys keys = {kImage});
  static Normalize zscore(double mean, double std, Keys keys = {kImage});
  static Normalize min_max(Keys keys = {kImage});
  static Normalize window(double low, double high, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "Normalize"; }

 private:
  Normalize(Mode mode, double a, double b, bool given, Keys keys);
  Mode mode_;
  double a_, b_;  // mean and std, or low and high
  bool given_;    // zscore with given statistics
  Keys keys_;
};

// Flips each spatial axis in `axes` with probability p, independently.
class RandomFlip final : public Transform {
 public:
  explicit RandomFlip(std::vector<int> axes = {0, 1, 2}, double p = 0.5, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomFlip"; }

 private:
  std::vector<int> axes_;
  double p_;
  Keys keys_;
};

// Rotates by k quarter turns in the plane of spatial axes (a, b), k drawn from `ks`
// (default 0-3), from axis a towards axis b (numpy's rot90 with axes (a, b)).
class RandomRotate90 final : public Transform {
 public:
  explicit RandomRotate90(std::array<int, 2> plane = {1, 2}, std::vector<int> ks = {0, 1, 2, 3},
                          Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomRotate90"; }

 private:
  std::array<int, 2> plane_;
  std::vector<int> ks_;
  Keys keys_;
};

// The central (or a random) box of `size` voxels; a volume smaller than it along an axis
// is an error naming both shapes.
class CenterCrop final : public Transform {
 public:
  explicit CenterCrop(std::array<int64_t, 3> size, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "CenterCrop"; }

 private:
  std::array<int64_t, 3> size_;
  Keys keys_;
};

class RandomCrop final : public Transform {
 public:
  explicit RandomCrop(std::array<int64_t, 3> size, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomCrop"; }

 private:
  std::array<int64_t, 3> size_;
  Keys keys_;
};

// Pads with `value` up to at least `size` voxels per axis, evenly on both sides (the
// odd voxel after), as MONAI's SpatialPad.
class Pad final : public Transform {
 public:
  explicit Pad(std::array<int64_t, 3> size, double value = 0, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "Pad"; }

 private:
  std::array<int64_t, 3> size_;
  double value_;
  Keys keys_;
};

// Resamples to `size` voxels (data/resample.h): trilinear for `keys` (PyTorch's
// F.interpolate, align_corners=False), nearest for `nearest_keys` (label maps keep their
// classes and dtype).
class Resize final : public Transform {
 public:
  explicit Resize(std::array<int64_t, 3> size, Keys keys = {kImage}, Keys nearest_keys = {});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "Resize"; }

 private:
  std::array<int64_t, 3> size_;
  Keys keys_, nearest_keys_;
};

// With probability p, a random affine map about the volume's centre, the same for every
// key (MONAI's RandAffine): per spatial axis a rotation angle ~ U(-r, r) radians in the
// plane of the two other axes (applied axis 0's first), a scale ~ 1 + U(-s, s) and a
// translation ~ U(-t, t) voxels. The content is scaled, rotated, then moved; the output
// keeps the input's grid, trilinear for `keys`, nearest for `nearest_keys`, 0 where the
// map leaves the volume (data/resample.h: affine_resample).
class RandomAffine final : public Transform {
 public:
  struct Options {
    std::array<double, 3> rotate_range{0, 0, 0};     // radians
    std::array<double, 3> scale_range{0, 0, 0};      // relative
    std::array<double, 3> translate_range{0, 0, 0};  // voxels
    double p = 1.0;
    Keys keys = {kImage};
    Keys nearest_keys = {};
  };
  explicit RandomAffine(Options options);
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomAffine"; }
  // The voxel map of rotation angles, scales and a translation (exposed for tests).
  static VoxelAffine map_of(const std::array<double, 3>& angles, const std::array<double, 3>& scales,
                            const std::array<double, 3>& translation);
  // A map drawn from the ranges of `options` (the angles, then the scales, then the
  // translation), as apply draws it; RandomElasticDeform draws its affine part with it.
  static VoxelAffine draw(const Options& options, Generator& generator);

 private:
  Options options_;
};

// x -> change(x, v), v ~ U[low, high): the body RandomIntensityScale and
// RandomIntensityShift share.
class RandomIntensity : public Transform {
 public:
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return name_; }

 protected:
  RandomIntensity(std::string name, double low, double high, Keys keys);
  virtual Tensor change(const Tensor& x, double v) const = 0;

 private:
  std::string name_;
  double low_, high_;
  Keys keys_;
};

// x * s, s ~ U[low, high).
class RandomIntensityScale final : public RandomIntensity {
 public:
  RandomIntensityScale(double low, double high, Keys keys = {kImage});

 private:
  Tensor change(const Tensor& x, double s) const override;
};

// x + t, t ~ U[low, high).
class RandomIntensityShift final : public RandomIntensity {
 public:
  RandomIntensityShift(double low, double high, Keys keys = {kImage});

 private:
  Tensor change(const Tensor& x, double t) const override;
};

// With probability p, x + N(0, std^2) per voxel.
class RandomGaussianNoise final : public Transform {
 public:
  explicit RandomGaussianNoise(double std, double p = 1.0, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomGaussianNoise"; }

 private:
  double std_, p_;
  Keys keys_;
};

// Gamma contrast: with g ~ U[low, high), x -> ((x - min) / (max - min))^g (max - min) +
// min, min and max the sample's (MONAI's RandAdjustContrast); a constant volume is kept.
class RandomGamma final : public Transform {
 public:
  RandomGamma(double low, double high, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override { return "RandomGamma"; }

 private:
  double low_, high_;
  Keys keys_;
};

// MedMNIST's 3D shape transform (its experiments' Transform3D): training volumes times
// u ~ U[0, 1), evaluation volumes times 0.5.
class MedMnistShapeTransform final : public Transform {
 public:
  explicit MedMnistShapeTransform(bool train, Keys keys = {kImage});
  void apply(Sample& sample, Generator& generator) const override;
  std::string name() const override {
    return train_ ? "MedMnistShapeTransform(train)" : "MedMnistShapeTransform(eval)";
  }

 private:
  bool train_;
  Keys keys_;
};

}  // namespace kiln::data
