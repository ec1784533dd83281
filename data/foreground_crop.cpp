// foreground_box, crop_or_pad and CropForeground (foreground_crop.h): one pass over the
// source's voxels for the box, then narrow views copied into a filled tensor.
#include "data/foreground_crop.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"
#include "data/transform_util.h"

namespace kiln::data {

ForegroundBox foreground_box(const Tensor& volume, double threshold, const std::array<int64_t, 3>& margin) {
  KILN_CHECK(volume.defined() && volume.dim() == 4, "foreground_box: expected a [C, D, H, W] volume, got ",
             volume.defined() ? volume.sizes() : Dims{});
  for (int64_t m : margin) KILN_CHECK(m >= 0, "foreground_box: the margin must be non-negative, got ", m);
  // [D, H, W]: above the threshold in any channel
  const std::vector<uint8_t> inside =
      gt(amax(volume, {0}), threshold).to(DType::UInt8).contiguous().to_vector<uint8_t>();
  const std::array<int64_t, 3> shape{volume.size(1), volume.size(2), volume.size(3)};
  std::array<int64_t, 3> lo{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::max()};
  std::array<int64_t, 3> hi{-1, -1, -1};
  size_t i = 0;
  for (int64_t z = 0; z < shape[0]; ++z) {
    for (int64_t y = 0; y < shape[1]; ++y) {
      for (int64_t x = 0; x < shape[2]; ++x, ++i) {
        if (!inside[i]) continue;
        const std::array<int64_t, 3> p{z, y, x};
        for (size_t a = 0; a < 3; ++a) {
          lo[a] = std::min(lo[a], p[a]);
          hi[a] = std::max(hi[a], p[a]);
        }
      }
    }
  }
  ForegroundBox box;
  if (hi[0] < 0) return box;
  for (size_t a = 0; a < 3; ++a) {
    box.start[a] = lo[a] - margin[a];
    box.end[a] = hi[a] + 1 + margin[a];
  }
  return box;
}

Tensor crop_or_pad(const Tensor& t, const ForegroundBox& box, double value) {
  std::vector<int64_t> shape{t.size(0)};
  for (size_t a = 0; a < 3; ++a) {
    KILN_CHECK(box.end[a] > box.start[a], "crop_or_pad: an empty box along axis ", a);
    shape.push_back(box.end[a] - box.start[a]);
  }
  Tensor out = full(shape, value, {.dtype = t.dtype(), .device = t.device()});
  Tensor from = t, to = out;
  for (size_t a = 0; a < 3; ++a) {
    const auto dim = static_cast<int64_t>(a) + 1;
    const int64_t first = std::max<int64_t>(box.start[a], 0), last = std::min(box.end[a], t.size(dim));
    if (last <= first) return out;  // the box lies outside: all padding
    from = from.narrow(dim, first, last - first);
    to = to.narrow(dim, first - box.start[a], last - first);
  }
  to.copy_(from);
  return out;
}

CropForeground::CropForeground(std::array<int64_t, 3> margin, double threshold, Keys keys,
                               std::string source_key, double value)
    : margin_(margin),
      threshold_(threshold),
      keys_(std::move(keys)),
      source_key_(std::move(source_key)),
      value_(value) {
  for (int64_t m : margin_) KILN_CHECK(m >= 0, "CropForeground: the margin must be non-negative, got ", m);
  KILN_CHECK(!keys_.empty(), "CropForeground: no keys");
}

void CropForeground::apply(Sample& sample, Generator&) const {
  const Tensor source = volume(sample, source_key_, name());  // a handle: the keys are replaced below
  ForegroundBox box = foreground_box(source, threshold_, margin_);
  if (box.end[0] == 0) box.end = {source.size(1), source.size(2), source.size(3)};  // no foreground: whole
  for (const std::string& key : keys_) {
    KILN_CHECK(volume(sample, key, name()).size(1) == source.size(1) &&
                   volume(sample, key, name()).size(2) == source.size(2) &&
                   volume(sample, key, name()).size(3) == source.size(3),
               name(), ": '", key, "' of shape ", volume(sample, key, name()).sizes(),
               " is not on the grid of '", source_key_, "' ", source.sizes());
  }
  for (const std::string& key : keys_) {
    Tensor& t = volume(sample, key, name());
    t = crop_or_pad(t, box, value_);
  }
  std::ostringstream os;
  for (size_t a = 0; a < 3; ++a) os << (a ? "," : "") << box.start[a] << "," << box.end[a];
  sample.metadata["foreground_box"] = os.str();
}

}  // namespace kiln::data
