// BasicUNet: MONAI's 3-D U-Net (monai.networks.nets.BasicUNet) with its layout and its
// state-dict names, so MONAI checkpoints load by name (the .pth reader and
// load_state_dict_mapped) and Kiln's weights load into MONAI.
//
//   conv_0    two conv blocks on the input: features[0] channels
//   down_k    2x2x2 max-pool, two conv blocks: features[k] channels (k = 1..4)
//   upcat_k   upsample by 2 (a 2x2x2 transposed conv, or a 1x1x1 conv then trilinear
//             interpolation with align_corners), replicate-pad the far end of a spatial dim
//             by one voxel where the skip connection is one longer (odd sizes), concatenate
//             [skip, upsampled], two conv blocks (k = 4..1; upcat_1 keeps its channels
//             instead of halving them and gives features[5])
//   final_conv  1x1x1 conv to out_channels: the logits, at the input's size
// A conv block ("Convolution" in MONAI) is `conv` (3x3x3, padding 1) then `adn`: `N` the
// norm, `D` dropout, `A` the activation. The names nest as MONAI's, e.g.
// `down_2.convs.conv_1.adn.N.weight`, `upcat_3.upsample.deconv.weight`.
//
// Any input size of at least 16 along each spatial dim works (four poolings; instance norm
// also needs more than one voxel at the bottom in training): odd sizes are padded as MONAI
// does. Parameters start as PyTorch's defaults (MONAI does not re-initialise them).
//
//   auto unet = std::make_shared<nn::models::BasicUNet>(nn::models::BasicUNetOptions{.out_channels = 3});
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/container.h"
#include "nn/layer.h"

namespace kiln::nn::models {

enum class UNetNorm {
  Instance,
  Batch,
  Group
};  // MONAI: ("instance", {"affine": True}), "batch", ("group", ...)
enum class UNetActivation {
  LeakyReLU,
  ReLU,
  PReLU
};  // MONAI: ("LeakyReLU", {"negative_slope": s}), "relu", "prelu"
enum class UNetUpsample { Deconv, Trilinear };  // MONAI: "deconv", "nontrainable"

// MONAI's arguments in its order (spatial_dims is 3), the parameters of act and norm
// after them.
struct BasicUNetOptions {
  int64_t in_channels = 1;
  int64_t out_channels = 2;
  std::vector<int64_t> features = {32, 32, 64, 128, 256, 32};
  UNetActivation act = UNetActivation::LeakyReLU;
  UNetNorm norm = UNetNorm::Instance;
  bool bias = true;
  double dropout = 0.0;
  UNetUpsample upsample = UNetUpsample::Deconv;
  double negative_slope = 0.1;  // LeakyReLU's
  int64_t num_groups = 8;       // GroupNorm's: must divide every feature count
};

class BasicUNet : public Layer {
 public:
  explicit BasicUNet(const BasicUNetOptions& options = {});
  // [N, in_channels, D, H, W] -> logits [N, out_channels, D, H, W].
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "BasicUNet"; }

 private:
  class UpCat;
  BasicUNetOptions options_;
  std::shared_ptr<Sequential> conv_0_;
  std::vector<std::shared_ptr<Sequential>> downs_;  // down_1 .. down_4
  std::vector<std::shared_ptr<UpCat>> upcats_;      // upcat_4 .. upcat_1
  std::shared_ptr<Layer> final_conv_;
};

}  // namespace kiln::nn::models
