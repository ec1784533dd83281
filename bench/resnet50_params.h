// The parameter shapes of a 3D ResNet-50 (torchvision's ResNet-50 with every 2D conv made
// 3D), in the order Module::parameters() would list them. The optimizer and gradient
// clipping benchmarks (CPU and CUDA) update this list, so their numbers describe a real
// training step: 161 tensors from 400 elements to 2.4 M, about 47 M parameters.
//
// Layout: stem conv 7x7x7 (64 channels) + batch norm; four stages of bottleneck blocks
// [3, 4, 6, 3] with widths 64, 128, 256, 512 and expansion 4 (outputs 256 .. 2048), each
// block conv1 1x1x1, conv2 3x3x3, conv3 1x1x1, each conv followed by a batch norm (weight
// and bias), the first block of each stage with a 1x1x1 downsample conv + batch norm;
// convs have no bias; then fc 2048 -> num_classes with bias.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::bench {

inline std::vector<std::vector<int64_t>> resnet3d50_param_shapes(int64_t in_channels = 3,
                                                                  int64_t num_classes = 400) {
  std::vector<std::vector<int64_t>> shapes;
  const auto conv = [&](int64_t out, int64_t in, int64_t k) { shapes.push_back({out, in, k, k, k}); };
  const auto batch_norm = [&](int64_t channels) {
    shapes.push_back({channels});  // weight
    shapes.push_back({channels});  // bias
  };

  conv(64, in_channels, 7);
  batch_norm(64);

  constexpr int64_t kExpansion = 4;
  const int64_t blocks_per_stage[4] = {3, 4, 6, 3};
  const int64_t widths[4] = {64, 128, 256, 512};
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = widths[stage];
    const int64_t out = width * kExpansion;
    for (int64_t block = 0; block < blocks_per_stage[stage]; ++block) {
      conv(width, in, 1);
      batch_norm(width);
      conv(width, width, 3);
      batch_norm(width);
      conv(out, width, 1);
      batch_norm(out);
      if (block == 0) {  // downsample: 1x1x1 conv + batch norm matching the block's output
        conv(out, in, 1);
        batch_norm(out);
      }
      in = out;
    }
  }

  shapes.push_back({num_classes, in});  // fc.weight
  shapes.push_back({num_classes});      // fc.bias
  return shapes;
}

}  // namespace kiln::bench
