// DenseNet3d: DenseNet-121/169/201/264 for volumes (Huang et al., "Densely Connected
// Convolutional Networks"), with MONAI's DenseNet's dotted names (monai.networks.nets.
// DenseNet121 with spatial_dims = 3: `features.denseblock1.denselayer1.layers.norm1.
// weight`, ..., `class_layers.out.weight`) or torchvision's layout (`...denselayer1.
// norm1.weight`, `classifier.weight`), so weights move both ways by name.
//
//   features: conv0 7x7x7 stride 2, norm0, relu0, pool0 3x3x3 max stride 2 (or, for 28^3
//             inputs, conv0 3x3x3 stride 1 and no pool); dense blocks of L layers, each
//             adding growth_rate channels; between blocks a transition (norm, relu,
//             1x1x1 conv to floor(C x compression) channels, 2x2x2 average pool); norm5.
//   a dense layer: norm1, relu1, conv1 1x1x1 to bn_size x growth_rate channels, norm2,
//             relu2, conv2 3x3x3 to growth_rate channels (or depthwise 3x3x3 + BN +
//             pointwise 1x1x1), dropout; its input is the concatenation of the block's
//             input and every earlier layer's output.
//   head:     relu, global average pool, flatten, Linear.
// Convs have no bias; Kaiming normal (fan_in) convs, BN 1 / 0, Linear bias 0, as MONAI.
//
// Note [Memory-efficient DenseNet] (Pleiss et al., "Memory-Efficient Implementation of
// DenseNets"): in a plain dense block, layer l's norm1 keeps its input, the concatenation
// of every earlier feature map, and its ReLU's output (conv1's input) is as wide, so a
// block of L layers keeps O(L^2) channels of activations for backward although each
// layer adds only growth_rate. With memory_efficient, each layer runs "concatenate, norm1,
// relu1, conv1, norm2, relu2" under checkpoint (core/autograd/checkpoint.h): only the
// list of the block's feature maps (kept anyway: they make the block's output) and
// conv2's input (bn_size x growth_rate channels) stay; backward recomputes the rest, one
// more pass of each layer's 1x1x1 conv and elementwise ops, never of its 3x3x3 conv. The
// batch norms are recomputed with the same batch statistics and update their running
// statistics once (Note [Checkpoint recompute]), so gradients and state are bit-identical
// to the plain mode's (test). torchvision's memory_efficient stops the checkpoint at
// conv1, which keeps the bottleneck's output for norm2 too (2 x bn_size x growth_rate
// channels per layer, not 1). Pleiss et al. also share one buffer among the layers'
// concatenations; here each recompute allocates its concatenation and frees it when its
// backward is done, which the caching allocator turns into the same reuse.
//
//   auto model = std::make_shared<nn::models::DenseNet3d>(nn::models::DenseNet3dOptions{.depth = 121});
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"
#include "nn/models/layers.h"

namespace kiln::nn::models {

enum class DenseNet3dStem { Standard, SmallInput };  // 7x7x7 s2 + max-pool, or 3x3x3 s1
enum class DenseNet3dActivation { ReLU, Swish, PReLU };
enum class DenseNet3dNaming { MONAI, Torchvision };

struct DenseNet3dOptions {
  int64_t depth = 121;  // 121, 169, 201 or 264
  int64_t in_channels = 1;
  int64_t num_classes = 2;
  int64_t init_features = 64;
  int64_t growth_rate = 32;
  int64_t bn_size = 4;
  double compression = 0.5;  // a transition keeps floor(C x compression) channels
  double drop_rate = 0.0;    // channel dropout after each dense layer (MONAI's)
  DenseNet3dStem stem = DenseNet3dStem::Standard;
  DenseNet3dActivation activation = DenseNet3dActivation::ReLU;
  bool depthwise_separable = false;  // each layer's conv2 as depthwise 3x3x3 + BN + pointwise
  bool memory_efficient = false;     // Note [Memory-efficient DenseNet]
  DenseNet3dNaming naming = DenseNet3dNaming::MONAI;
  bool fused_bn_relu = false;      // "norm, relu" pairs as one fused BatchNorm3d (ReLU only)
  Generator* generator = nullptr;  // for the initialisation; the default generator when null
};

class DenseNet3d : public Layer {
 public:
  explicit DenseNet3d(const DenseNet3dOptions& options = {});
  // [N, in_channels, D, H, W] -> [N, num_classes].
  Tensor forward(const Tensor& input) override;
  // The `features` part: [N, in_channels, D, H, W] -> [N, feature_channels(), ...].
  Tensor features(const Tensor& input);
  int64_t feature_channels() const { return feature_channels_; }
  std::string type_name() const override { return "DenseNet3d"; }
  const DenseNet3dOptions& options() const { return options_; }

 private:
  DenseNet3dOptions options_;
  int64_t feature_channels_ = 0;
  std::shared_ptr<Layer> features_, head_;
};

// The layers per dense block of a depth: 121 -> {6, 12, 24, 16}, ...
std::vector<int64_t> densenet3d_blocks(int64_t depth);

}  // namespace kiln::nn::models
