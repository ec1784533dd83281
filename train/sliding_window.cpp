// sliding_window_inference (sliding_window.h): pad, list the windows, weigh and sum each
// batch of predictions into the output and the weights into a count map, divide, crop.
#include "train/sliding_window.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace kiln::train {
namespace {

constexpr const char* kOp = "sliding_window_inference";

std::vector<int64_t> checked_roi(const Tensor& inputs, const SlidingWindowOptions& o) {
  KILN_CHECK(inputs.defined() && inputs.dim() >= 3, kOp, ": inputs must be [B, C, d...], got ",
             inputs.defined() ? inputs.sizes() : Dims{});
  KILN_CHECK(inputs.is_floating_point(), kOp, ": inputs must be floating-point, got ", inputs.dtype());
  const size_t dims = static_cast<size_t>(inputs.dim() - 2);
  std::vector<int64_t> roi = o.roi_size;
  if (roi.size() == 1) roi.assign(dims, roi[0]);
  KILN_CHECK(roi.size() == dims, kOp, ": roi_size has ", o.roi_size.size(), " sizes for ", dims,
             " spatial dims (inputs ", inputs.sizes(), ")");
  for (int64_t r : roi) KILN_CHECK(r > 0, kOp, ": roi_size must be positive, got ", o.roi_size);
  KILN_CHECK(o.sw_batch_size > 0, kOp, ": sw_batch_size must be positive, got ", o.sw_batch_size);
  KILN_CHECK(o.overlap >= 0 && o.overlap < 1, kOp, ": overlap must be in [0, 1), got ", o.overlap);
  KILN_CHECK(o.mode == BlendMode::Constant || (std::isfinite(o.sigma_scale) && o.sigma_scale > 0), kOp,
             ": sigma_scale must be positive, got ", o.sigma_scale);
  return roi;
}

// inputs padded with cval to at least the window along each dim (the extra voxel at the
// end, as MONAI's F.pad with [half, diff - half]); `low` gets each dim's front padding.
Tensor pad_to_window(const Tensor& inputs, const std::vector<int64_t>& roi, double cval,
                     std::vector<int64_t>& low) {
  std::vector<int64_t> padded(inputs.sizes().begin(), inputs.sizes().end());
  bool any = false;
  for (size_t d = 0; d < roi.size(); ++d) {
    const int64_t diff = std::max<int64_t>(roi[d] - inputs.size(static_cast<int64_t>(d) + 2), 0);
    low.push_back(diff / 2);
    padded[d + 2] += diff;
    any = any || diff > 0;
  }
  if (!any) return inputs;
  Tensor out = full(padded, cval, {.dtype = inputs.dtype(), .device = inputs.device()});
  Tensor inner = out;
  for (size_t d = 0; d < roi.size(); ++d) {
    inner = narrow(inner, static_cast<int64_t>(d) + 2, low[d], inputs.size(static_cast<int64_t>(d) + 2));
  }
  inner.copy_(inputs);
  return out;
}

// The view of `t` [*, *, d...] at the window starting at `start`.
Tensor window_view(const Tensor& t, const std::vector<int64_t>& start, const std::vector<int64_t>& roi) {
  Tensor v = t;
  for (size_t d = 0; d < roi.size(); ++d) v = narrow(v, static_cast<int64_t>(d) + 2, start[d], roi[d]);
  return v;
}

// Every window's start, the first dim slowest (numpy's meshgrid with indexing="ij").
std::vector<std::vector<int64_t>> all_windows(const std::vector<std::vector<int64_t>>& starts) {
  std::vector<std::vector<int64_t>> out{{}};
  for (const std::vector<int64_t>& dim : starts) {
    std::vector<std::vector<int64_t>> next;
    for (const std::vector<int64_t>& prefix : out) {
      for (int64_t s : dim) {
        next.push_back(prefix);
        next.back().push_back(s);
      }
    }
    out = std::move(next);
  }
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> window_starts(const std::vector<int64_t>& image_size,
                                                const std::vector<int64_t>& roi_size, double overlap) {
  std::vector<std::vector<int64_t>> starts;
  for (size_t d = 0; d < image_size.size(); ++d) {
    const int64_t image = image_size[d], roi = std::min(roi_size[d], image);
    const int64_t interval =
        roi_size[d] == image
            ? roi
            : std::max<int64_t>(static_cast<int64_t>(static_cast<double>(roi) * (1 - overlap)), 1);
    // the first window index whose window reaches the end (MONAI's scan_num - 1)
    int64_t last = 0;
    while (last * interval + roi < image) ++last;
    std::vector<int64_t> dim;
    for (int64_t i = 0; i <= last; ++i)
      dim.push_back(i * interval - std::max<int64_t>(i * interval + roi - image, 0));
    starts.push_back(std::move(dim));
  }
  return starts;
}

Tensor importance_map(const std::vector<int64_t>& roi_size, BlendMode mode, double sigma_scale) {
  const TensorOptions f64{.dtype = DType::Float64};
  if (mode == BlendMode::Constant) return ones(roi_size, f64);
  Tensor map;
  for (size_t d = 0; d < roi_size.size(); ++d) {
    const int64_t n = roi_size[d];
    const double sigma = static_cast<double>(n) * sigma_scale;
    std::vector<double> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(i) - static_cast<double>(n - 1) / 2.0;
      g[static_cast<size_t>(i)] = std::exp(x * x / (-2.0 * sigma * sigma));
    }
    std::vector<int64_t> shape(roi_size.size(), 1);
    shape[d] = n;
    const Tensor axis = tensor<double>(g, shape);
    map = map.defined() ? mul(map, axis) : axis;
  }
  const double floor = std::max(min(map).item<double>(), 1e-3);
  return clamp(map, floor, std::nullopt);
}

Tensor sliding_window_inference(const Tensor& inputs, const WindowPredictor& predictor,
                                const SlidingWindowOptions& options) {
  const std::vector<int64_t> roi = checked_roi(inputs, options);
  KILN_CHECK(static_cast<bool>(predictor), kOp, ": no predictor");
  NoGradGuard no_grad;
  const Device sw_device = options.sw_device.value_or(inputs.device());
  const Device device = options.device.value_or(inputs.device());
  std::vector<int64_t> low;
  const Tensor padded = pad_to_window(inputs, roi, options.cval, low);
  const std::vector<int64_t> image(padded.sizes().begin() + 2, padded.sizes().end());
  const std::vector<std::vector<int64_t>> windows = all_windows(window_starts(image, roi, options.overlap));
  const Tensor weight = importance_map(roi, options.mode, options.sigma_scale).to(sw_device, inputs.dtype());

  const int64_t batch = padded.size(0);
  KILN_CHECK(batch > 0, kOp, ": an empty batch ", inputs.sizes());
  const auto total = static_cast<int64_t>(windows.size()) * batch;
  Tensor output, count;
  for (int64_t first = 0; first < total; first += options.sw_batch_size) {
    const int64_t last = std::min(first + options.sw_batch_size, total);
    std::vector<Tensor> pieces;
    for (int64_t w = first; w < last; ++w) {
      const Tensor image_w = narrow(padded, 0, w / static_cast<int64_t>(windows.size()), 1);
      pieces.push_back(
          window_view(image_w, windows[static_cast<size_t>(w) % windows.size()], roi).to(sw_device));
    }
    const Tensor predicted = predictor(pieces.size() == 1 ? pieces[0].contiguous() : cat(pieces, 0));
    KILN_CHECK(predicted.defined() && predicted.dim() == padded.dim() && predicted.size(0) == last - first,
               kOp, ": the predictor must return [", last - first, ", K, roi...], got ",
               predicted.defined() ? predicted.sizes() : Dims{});
    for (size_t d = 0; d < roi.size(); ++d) {
      KILN_CHECK(predicted.size(static_cast<int64_t>(d) + 2) == roi[d], kOp,
                 ": the predictor must keep the window's size ", roi, ", got ", predicted.sizes());
    }
    if (!output.defined()) {
      std::vector<int64_t> shape{batch, predicted.size(1)};
      shape.insert(shape.end(), image.begin(), image.end());
      output = zeros(shape, {.dtype = inputs.dtype(), .device = device});
      std::vector<int64_t> count_shape(shape.size(), 1);
      std::copy(image.begin(), image.end(), count_shape.begin() + 2);
      count = zeros(count_shape, {.dtype = inputs.dtype(), .device = device});
      const Tensor weight_out = weight.to(device);
      for (const std::vector<int64_t>& start : windows) window_view(count, start, roi).add_(weight_out);
    }
    const Tensor weighted = mul(predicted.to(inputs.dtype()), weight).to(device);
    for (int64_t w = first; w < last; ++w) {
      Tensor target = narrow(output, 0, w / static_cast<int64_t>(windows.size()), 1);
      window_view(target, windows[static_cast<size_t>(w) % windows.size()], roi)
          .add_(narrow(weighted, 0, w - first, 1));
    }
  }
  output.div_(count);
  Tensor cropped = output;
  for (size_t d = 0; d < roi.size(); ++d) {
    cropped = narrow(cropped, static_cast<int64_t>(d) + 2, low[d], inputs.size(static_cast<int64_t>(d) + 2));
  }
  return cropped.contiguous();
}

}  // namespace kiln::train
