// RandomCropByLabel (label_crop.h): one pass over the label map collects each group's
// voxel indices, a draw picks the group by its ratio (empty groups excluded) and one of its
// voxels, MONAI's centre correction keeps the box inside, and every key is cropped.
#include "data/label_crop.h"

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "data/transform_util.h"

namespace kiln::data {
namespace {

constexpr const char* kName = "RandomCropByLabel";

// The group of a voxel with `label`: pos_neg's background 0 / foreground 1, or the class.
int64_t group_of(int64_t label, bool by_class) { return by_class ? label : (label > 0 ? 1 : 0); }

// Index of `u` in [0, total) among cumulative weights (the last group with weight on ties).
size_t pick(const std::vector<double>& weights, double u) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double acc = 0;
  size_t last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    last = i;
    acc += weights[i];
    if (u * total < acc) return i;
  }
  return last;
}

}  // namespace

RandomCropByLabel::RandomCropByLabel(std::array<int64_t, 3> size, std::vector<double> ratios, bool by_class,
                                     Keys keys, std::string label_key)
    : size_(size),
      ratios_(std::move(ratios)),
      by_class_(by_class),
      keys_(std::move(keys)),
      label_key_(std::move(label_key)) {
  for (int64_t s : size_) KILN_CHECK(s >= 1, kName, ": the crop size must be positive, got ", s);
  KILN_CHECK(!ratios_.empty(), kName, ": no ratios");
  double total = 0;
  for (double r : ratios_) {
    KILN_CHECK(std::isfinite(r) && r >= 0, kName, ": ratios must be finite and non-negative, got ", r);
    total += r;
  }
  KILN_CHECK(total > 0, kName, ": the ratios must not all be 0");
  KILN_CHECK(!keys_.empty(), kName, ": no keys");
}

RandomCropByLabel RandomCropByLabel::pos_neg(std::array<int64_t, 3> size, double pos, double neg, Keys keys,
                                             std::string label_key) {
  return RandomCropByLabel(size, {neg, pos}, false, std::move(keys), std::move(label_key));
}

RandomCropByLabel RandomCropByLabel::classes(std::array<int64_t, 3> size, std::vector<double> ratios,
                                             Keys keys, std::string label_key) {
  return RandomCropByLabel(size, std::move(ratios), true, std::move(keys), std::move(label_key));
}

std::array<int64_t, 3> corrected_crop_center(const std::array<int64_t, 3>& center,
                                             const std::array<int64_t, 3>& size,
                                             const std::array<int64_t, 3>& shape) {
  std::array<int64_t, 3> out{};
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t start = size[axis] / 2;
    // uint16(shape + 1 - size / 2) in MONAI: the true quotient, truncated
    int64_t end =
        static_cast<int64_t>(static_cast<double>(shape[axis] + 1) - static_cast<double>(size[axis]) / 2.0);
    if (start == end) ++end;
    out[axis] = std::min(std::max(center[axis], start), end - 1);
  }
  return out;
}

void RandomCropByLabel::apply(Sample& sample, Generator& generator) const {
  const Tensor& label = volume(sample, label_key_, kName);
  KILN_CHECK(label.size(0) == 1, kName, ": '", label_key_, "' must be a label map [1, D, H, W], got ",
             label.sizes());
  check_fits(label, size_, kName, label_key_);
  const std::array<int64_t, 3> shape{label.size(1), label.size(2), label.size(3)};
  const std::vector<int64_t> labels = label.to(DType::Int64).contiguous().to_vector<int64_t>();
  std::vector<std::vector<int64_t>> voxels(ratios_.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t g = group_of(labels[i], by_class_);
    KILN_CHECK(g >= 0 && g < static_cast<int64_t>(ratios_.size()), kName, ": label ", labels[i],
               " has no ratio (", ratios_.size(), " classes)");
    voxels[static_cast<size_t>(g)].push_back(static_cast<int64_t>(i));
  }
  std::vector<double> weights = ratios_;
  for (size_t g = 0; g < weights.size(); ++g) {
    if (voxels[g].empty()) weights[g] = 0;
  }
  const size_t group = pick(weights, uniform(generator, 0, 1));
  KILN_CHECK(weights[group] > 0, kName, ": no voxel of any class with a positive ratio");
  const std::vector<int64_t>& candidates = voxels[group];
  const auto chosen = std::min<size_t>(
      candidates.size() - 1,
      static_cast<size_t>(uniform(generator, 0, 1) * static_cast<double>(candidates.size())));
  int64_t flat = candidates[chosen];
  std::array<int64_t, 3> center{};
  for (int axis = 2; axis >= 0; --axis) {
    center[static_cast<size_t>(axis)] = flat % shape[static_cast<size_t>(axis)];
    flat /= shape[static_cast<size_t>(axis)];
  }
  const std::array<int64_t, 3> c = corrected_crop_center(center, size_, shape);
  const std::array<int64_t, 3> start{c[0] - size_[0] / 2, c[1] - size_[1] / 2, c[2] - size_[2] / 2};
  for (const std::string& key : keys_) {  // every key checked before any is cropped
    const Tensor& t = volume(sample, key, kName);
    KILN_CHECK(t.size(1) == shape[0] && t.size(2) == shape[1] && t.size(3) == shape[2], kName, ": '", key,
               "' of shape ", t.sizes(), " is not on the label map's grid ", label.sizes());
  }
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, kName);
    t = crop(t, start, size_);
  }
}

}  // namespace kiln::data
