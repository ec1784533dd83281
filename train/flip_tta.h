// Test-time augmentation by flips (`--tta flips`; nnU-Net's mirroring): a segmentation's
// class probabilities averaged over every combination of flips of the chosen spatial axes
// (2^3 = 8 in 3-D), each prediction flipped back before it is added, so a prediction that
// depends on where a structure lies (left or right of the window, say) is averaged away.
//
//   const Tensor p = flip_averaged_probabilities(volume, [&](const Tensor& x) {
//     return sliding_window_inference(x, predictor, options);  // logits [B, K, d...]
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace kiln::train {

// inputs [B, C, d...]; logits_of gives logits [B, K, d...]; the result is the mean of
// softmax over K of each flipped prediction, [B, K, d...]. `axes` are spatial (0 = the
// first spatial dim), each at most once; empty: one plain prediction.
Tensor flip_averaged_probabilities(const Tensor& inputs,
                                   const std::function<Tensor(const Tensor&)>& logits_of,
                                   const std::vector<int64_t>& axes = {0, 1, 2});

}  // namespace kiln::train
