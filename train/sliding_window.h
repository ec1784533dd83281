// Sliding-window inference with MONAI's definition (monai.inferers.sliding_window_inference):
// a network trained on patches predicts a whole volume window by window, the windows
// overlapping and their predictions blended.
//
// The volume is padded (with `cval`, split evenly, the extra voxel at the end) where it is
// smaller than the window; windows start every window x (1 - overlap) voxels along each
// dim (at least 1; the whole dim when the window spans it), the last one moved back to end
// at the volume's edge. Each window's prediction is weighted by an importance map
// (Constant: 1; Gaussian: exp(-x^2 / 2 sigma^2) per dim, sigma = window x sigma_scale, the
// map clamped below at max(its minimum, 1e-3)), summed into the output and divided by the
// summed weights; the padding is cropped off. Windows go to the predictor `sw_batch_size`
// at a time, across the images of the batch, in MONAI's order.
//
// Memory: the windows run on `sw_device` (the input's device by default) and the output
// accumulates on `device`: a large volume's logits can stay on the host while the
// network runs on the GPU. Runs without autograd; the output has the input's dtype.
//
//   const Tensor logits = sliding_window_inference(volume, [&](const Tensor& w) { return net->forward(w); },
//                                                  {.roi_size = {96, 96, 96}, .sw_batch_size = 4, .overlap =
//                                                  0.5});
//   SlidingWindowOptions{.roi_size = {64, 64, 64}, .overlap = 0.5, .mode = BlendMode::Gaussian}
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace kiln::train {

enum class BlendMode { Constant, Gaussian };

// MONAI's arguments in its order (the predictor apart).
struct SlidingWindowOptions {
  std::vector<int64_t> roi_size{};  // the window, one size per spatial dim (or one for all)
  int64_t sw_batch_size = 1;        // windows per predictor call
  double overlap = 0.25;            // in [0, 1)
  BlendMode mode = BlendMode::Constant;
  double sigma_scale = 0.125;         // Gaussian: sigma = window x sigma_scale
  double cval = 0.0;                  // padding value
  std::optional<Device> sw_device{};  // where the windows run; the input's device by default
  std::optional<Device> device{};     // where the output accumulates; the input's device by default
};

// windows [n, C, roi...] -> predictions [n, K, roi...].
using WindowPredictor = std::function<Tensor(const Tensor& windows)>;

// inputs [B, C, d...] -> [B, K, d...].
Tensor sliding_window_inference(const Tensor& inputs, const WindowPredictor& predictor,
                                const SlidingWindowOptions& options);

// The blending weights of one window [roi...] in float64 (exposed for tests and benchmarks).
Tensor importance_map(const std::vector<int64_t>& roi_size, BlendMode mode, double sigma_scale);

// The start of every window along each dim, MONAI's dense_patch_slices for an image of
// `image_size` (at least the window along each dim).
std::vector<std::vector<int64_t>> window_starts(const std::vector<int64_t>& image_size,
                                                const std::vector<int64_t>& roi_size, double overlap);

}  // namespace kiln::train
