// ResUNet: nnU-Net's residual-encoder U-Net (its ResEnc presets' network:
// dynamic_network_architectures' ResidualEncoderUNet) with its state-dict names, so
// nnU-Net weights load by name and Kiln's load into nnU-Net.
//
//   encoder.stem      one conv block (conv, instance norm, LeakyReLU) to features[0]
//   encoder.stages.s  residual blocks (nnU-Net's BasicBlockD): conv1 (strided by
//                     strides[s] in the stage's first block) -> norm -> LeakyReLU -> conv2
//                     -> norm, plus the skip (a strides[s] average pool, then a 1x1x1 conv
//                     and norm where the channels change), LeakyReLU after the sum
//   decoder.transpconvs.s  a transposed conv by the stride below, to the skip's channels
//   decoder.stages.s  conv blocks on cat([upsampled, skip])
//   decoder.seg_layers.s   1x1x1 convs to the classes: with deep supervision one per
//                     decoder stage (forward_deep: highest resolution first), else only the
//                     last is used
// As nnU-Net, every conv block registers its layers twice (`conv`, `norm`, `nonlin` and
// `all_modules.0..`) and the decoder holds the encoder (`decoder.encoder.*`): the state dict
// lists each tensor under every name, the parameters once.
//
// Kernel sizes and strides are per stage and per axis (nnU-Net plans [1, 3, 3] kernels and
// [1, 2, 2] strides for thick slices); an input's size along an axis must be divisible by
// the product of that axis' strides.
//
// Note [Deep supervision] (nnU-Net): the loss is sum_i w_i loss(output_i, labels_i), the
// labels downsampled to each output's size, with w_i = 1 / 2^i halving with depth, the
// lowest resolution's weight set to 0, and the weights normalised to sum to 1
// (deep_supervision_weights).
//
//   auto net = std::make_shared<nn::models::ResUNet>(nn::models::ResUNetOptions{.num_classes = 3});
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "nn/container.h"
#include "nn/layer.h"

namespace kiln::nn::models {

// nnU-Net's arguments in its order (n_stages is features.size()).
struct ResUNetOptions {
  int64_t in_channels = 1;
  std::vector<int64_t> features = {32, 64, 128, 256, 320, 320};
  std::vector<std::array<int64_t, 3>> kernel_sizes = {};  // per stage; empty: 3x3x3 everywhere
  std::vector<std::array<int64_t, 3>> strides = {};       // per stage; empty: 1, then 2 everywhere
  std::vector<int64_t> blocks = {1, 3, 4, 6, 6, 6};       // residual blocks per stage (ResEnc M)
  int64_t num_classes = 2;
  std::vector<int64_t> decoder_convs = {};  // per decoder stage; empty: 1 each
  bool conv_bias = true;
  bool deep_supervision = true;
  double negative_slope = 0.01;  // LeakyReLU's (nnU-Net: PyTorch's default)
};

class ResUNet : public Layer {
 public:
  explicit ResUNet(const ResUNetOptions& options = {});
  // [N, in_channels, D, H, W] -> the full-resolution logits [N, num_classes, D, H, W].
  Tensor forward(const Tensor& input) override;
  // Every decoder stage's logits, highest resolution first (deep supervision; with it off,
  // the full-resolution logits alone).
  std::vector<Tensor> forward_deep(const Tensor& input);
  std::string type_name() const override { return "ResUNet"; }
  const ResUNetOptions& options() const { return options_; }

 private:
  std::vector<Tensor> skips(const Tensor& input);
  std::vector<Tensor> decode(const std::vector<Tensor>& skips, bool every_stage);
  ResUNetOptions options_;
  std::shared_ptr<Sequential> stem_, stages_;
  std::vector<std::shared_ptr<Layer>> decoder_stages_, transpconvs_, seg_layers_;
};

// Note [Deep supervision]'s weights for `outputs` outputs, highest resolution first.
std::vector<double> deep_supervision_weights(int64_t outputs);

// Note [Deep supervision]'s loss over forward_deep's outputs: sum_i w_i loss(outputs[i],
// labels_i), labels [N, 1, D, H, W] resized to each output's size by nearest-exact (as
// nnU-Net's DownsampleSegForDSTransform); outputs of weight 0 are skipped (nnU-Net's
// DeepSupervisionWrapper).
using SegmentationLossFn = std::function<Tensor(const Tensor& logits, const Tensor& labels)>;
Tensor deep_supervision_loss(const std::vector<Tensor>& outputs, const Tensor& labels,
                             const SegmentationLossFn& loss);

}  // namespace kiln::nn::models
