// ResNet3d: the 3D ResNets of the medical imaging literature, depths 10-200, in two
// families whose dotted parameter names equal their reference code, so weights move both
// ways by name (load_state_dict, nn::load_weights, the .pth reader):
//
//   MedicalNet (Tencent/MedicalNet models/resnet.py, "Med3D"): stem conv1 7x7x7 stride 2,
//     bn1, relu, maxpool 3x3x3 stride 2; layer1..4 with strides 1, 2, 1, 1 and dilations
//     1, 1, 2, 4 (the segmentation backbone: output stride 8), or strides 1, 2, 2, 2
//     (dilated_layers = false, for classification); projection shortcuts named
//     `downsample`; head `conv_seg` (segmentation) or avgpool + `fc` (classification).
//   MedMNIST (the MedMNIST v2 benchmark's "ResNet-18 + 3D", experiments/MedMNIST3D/
//     models.py, kuangliu's CIFAR ResNet made 3D): stem conv1 3x3x3 stride 1, bn1, relu,
//     no max-pool; strides 1, 2, 2, 2; shortcuts named `shortcut`; head avgpool + `linear`.
//
// Blocks: BasicBlock (3x3x3, 3x3x3; depths 10, 18, 34) and Bottleneck (1x1x1, 3x3x3,
// 1x1x1 with expansion 4; depths 50, 101, 152, 200). Where the stride or width changes,
// the shortcut is type B (1x1x1 conv + BN projection) or type A (identity subsampled by
// the stride, zero channels appended: no parameters). Convs feeding a batch norm have no
// bias, everywhere (see the note on conv_seg below). widen_factor scales every width
// (int(64 x factor), ...), as Hara et al.'s 3D ResNets do.
//
// Note [conv_seg's bias]: MedicalNet's segmentation head starts with a ConvTranspose3d
// that has a bias, followed by a BatchNorm3d that subtracts the batch mean: the bias has
// no effect on the output or on any gradient. Here that transposed conv has no bias, so a
// MedicalNet checkpoint's `conv_seg.0.bias` is one key the load report lists as
// unexpected (drop it, or every conv_seg key for a new head).
//
// Note [Shortcut A's gradient]: MedicalNet's type-A shortcut concatenates `out.data` with
// the zero channels, which detaches it: no gradient flows through the identity path of a
// type-A downsampling block there. Here it does, as in the ResNet paper; the forward pass
// is the same.
//
//   auto model = std::make_shared<nn::models::ResNet3d>(nn::models::ResNet3dOptions{.depth = 18});
//   Tensor logits = model->forward(volumes);  // [N, 1, 28, 28, 28] -> [N, 2]
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/layer.h"
#include "nn/models/layers.h"

namespace kiln::nn::models {

enum class ResNet3dFamily { MedMNIST, MedicalNet };
enum class ShortcutType { A, B };
enum class ResNet3dHead { Classification, Segmentation };

struct ResNet3dOptions {
  int64_t depth = 18;  // 10, 18, 34, 50, 101, 152 or 200
  int64_t in_channels = 1;
  int64_t num_classes = 2;  // classes, or segmentation classes (MedicalNet's num_seg_classes)
  ResNet3dFamily family = ResNet3dFamily::MedMNIST;
  ShortcutType shortcut_type = ShortcutType::B;
  double widen_factor = 1.0;
  ResNet3dHead head = ResNet3dHead::Classification;
  // MedicalNet's layer3/layer4: stride 1 with dilation 2 and 4. nullopt: on for
  // MedicalNet's segmentation head, off (strides 2, 2) otherwise; MedMNIST never dilates.
  std::optional<bool> dilated_layers = std::nullopt;
  // The stem conv's (and max-pool's) stride along depth, when it should differ from the
  // in-plane one (anisotropic scans with few slices); nullopt: the in-plane stride.
  std::optional<int64_t> stem_depth_stride = std::nullopt;
  double dropout = 0.0;  // before the classification Linear
  ConvInit init = ConvInit::KaimingNormalFanOut;
  bool zero_init_residual = false;  // the last BN of each block starts at weight 0
  // Every "bn, relu" pair as one fused BatchNorm3d (layers.h), and each block's tail
  // "bn, + shortcut, relu" as one fused op (BatchNorm3d::forward_add_relu).
  bool fused_bn_relu = false;
  // Each stage (layer1..4) under activation checkpointing (core/autograd/checkpoint.h):
  // only the stages' inputs are kept for backward, which re-runs each stage's forward; the
  // gradients and running statistics are bit for bit those of the plain network.
  bool checkpoint_stages = false;
  Generator* generator = nullptr;   // for the initialisation; the default generator when null
};

class ResNet3d : public Layer {
 public:
  explicit ResNet3d(const ResNet3dOptions& options = {});
  // [N, in_channels, D, H, W] -> [N, num_classes] (classification) or
  // [N, num_classes, D', H', W'] (segmentation: the features upsampled 2x).
  Tensor forward(const Tensor& input) override;
  // The backbone alone: stem and layer1..4, [N, C, D, H, W] -> [N, feature_channels(), ...].
  Tensor features(const Tensor& input);
  // The head's input channels: 512 x expansion x widen_factor.
  int64_t feature_channels() const { return feature_channels_; }
  // The spatial size of features() for an input of `spatial` (3 sizes), by the convs'
  // output-size formula (no computation): e.g. MedicalNet's 56x448x448 -> 7x56x56.
  std::vector<int64_t> feature_size(const std::vector<int64_t>& spatial) const;
  // The head becomes `head` under the same name (`conv_seg`, `fc` or `linear`): the
  // guides' "replace conv_seg by pool + flatten + Linear" recipe. forward then runs
  // features() and `head`.
  void replace_head(std::shared_ptr<Layer> head);
  const std::string& head_name() const { return head_name_; }
  std::string type_name() const override { return "ResNet3d"; }
  const ResNet3dOptions& options() const { return options_; }

 private:
  struct Stage {
    int64_t stride, dilation;
  };
  void build_stem();
  std::shared_ptr<Layer> make_layer(int64_t planes, int64_t blocks, Stage stage);
  Tensor forward_stage(Layer& stage, const Tensor& x);
  void build_head();

  ResNet3dOptions options_;
  bool bottleneck_ = false;
  std::vector<Stage> stages_;
  int64_t in_planes_ = 0, feature_channels_ = 0;
  std::shared_ptr<Conv3d> conv1_;
  std::shared_ptr<BatchNorm3d> bn1_;
  std::shared_ptr<Layer> maxpool_, avgpool_, dropout_;  // null where the model has none
  std::vector<std::shared_ptr<Layer>> layers_;
  std::shared_ptr<Layer> head_;
  std::string head_name_;
};

// The depths and their blocks: {blocks per layer}, and whether they are Bottlenecks.
std::vector<int64_t> resnet3d_blocks(int64_t depth);
bool resnet3d_uses_bottleneck(int64_t depth);

}  // namespace kiln::nn::models
