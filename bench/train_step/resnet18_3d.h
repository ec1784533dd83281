// The network the end-to-end training-step benchmark trains: the "ResNet-18 + 3D" of the
// MedMNIST v2 benchmark (its 2D ResNet-18 with every conv made 3D), written here from
// nn layers until Kiln bundles its models (nn/models/).
//
// Layout (MedMNIST's stem: no max-pool, a 3x3x3 stride-1 first conv, for 28^3 volumes):
//   conv1 3x3x3 in -> 64, bn1, relu
//   layer1..layer4: two BasicBlocks each, widths 64, 128, 256, 512, strides 1, 2, 2, 2;
//     a block is conv3x3x3 -> bn -> relu -> conv3x3x3 -> bn, plus its shortcut (identity,
//     or a 1x1x1 conv + bn projection where the stride or the width changes), then relu
//   global average pool, linear 512 -> classes.
// Convs have no bias (each feeds a batch norm). With one input channel: 33.16 M parameters.
// fuse_bn_relu: every "bn, relu" is one BatchNorm3d with .relu = true (Note [Batch norm
// with ReLU] in core/backend.h); the same network, the same numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/kiln.h"

namespace kiln::bench {

class BasicBlock3d : public nn::Layer {
 public:
  BasicBlock3d(int64_t in, int64_t out, int64_t stride, bool fuse_bn_relu) : fuse_bn_relu_(fuse_bn_relu) {
    conv1_ = register_module("conv1", conv(in, out, 3, stride));
    bn1_ = register_module("bn1", batch_norm(out, fuse_bn_relu));
    conv2_ = register_module("conv2", conv(out, out, 3, 1));
    bn2_ = register_module("bn2", batch_norm(out));
    if (stride != 1 || in != out) {
      shortcut_ = register_module("shortcut", std::make_shared<nn::Sequential>(
                                                  std::initializer_list<std::shared_ptr<nn::Layer>>{
                                                      conv(in, out, 1, stride), batch_norm(out)}));
    }
  }

  Tensor forward(const Tensor& x) override {
    Tensor y = bn1_->forward(conv1_->forward(x));
    if (!fuse_bn_relu_) y = y.relu();
    y = bn2_->forward(conv2_->forward(y));
    return y.add(shortcut_ ? shortcut_->forward(x) : x).relu();
  }

  static std::shared_ptr<nn::Conv3d> conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
    return std::make_shared<nn::Conv3d>(nn::Conv3dOptions{.in_channels = in,
                                                          .out_channels = out,
                                                          .kernel_size = {kernel},
                                                          .stride = {stride},
                                                          .padding = {kernel / 2},
                                                          .bias = false});
  }
  static std::shared_ptr<nn::BatchNorm3d> batch_norm(int64_t channels, bool relu = false) {
    return std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = channels, .relu = relu});
  }

 private:
  std::shared_ptr<nn::Conv3d> conv1_, conv2_;
  std::shared_ptr<nn::BatchNorm3d> bn1_, bn2_;
  std::shared_ptr<nn::Sequential> shortcut_;
  bool fuse_bn_relu_;
};

class ResNet18For3d : public nn::Layer {
 public:
  ResNet18For3d(int64_t in_channels, int64_t classes, bool fuse_bn_relu) : fuse_bn_relu_(fuse_bn_relu) {
    conv1_ = register_module("conv1", BasicBlock3d::conv(in_channels, 64, 3, 1));
    bn1_ = register_module("bn1", BasicBlock3d::batch_norm(64, fuse_bn_relu));
    int64_t width = 64;
    for (int64_t stage = 0; stage < 4; ++stage) {
      const int64_t out = int64_t{64} << stage;
      auto blocks = std::make_shared<nn::Sequential>();
      blocks->push_back(std::make_shared<BasicBlock3d>(width, out, stage == 0 ? 1 : 2, fuse_bn_relu));
      blocks->push_back(std::make_shared<BasicBlock3d>(out, out, 1, fuse_bn_relu));
      stages_[stage] = register_module("layer" + std::to_string(stage + 1), blocks);
      width = out;
    }
    pool_ = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool3d>(
                                           nn::AdaptiveAvgPool3dOptions{.output_size = {1}}));
    linear_ = register_module("linear", std::make_shared<nn::Linear>(
                                            nn::LinearOptions{.in_features = width, .out_features = classes}));
  }

  Tensor forward(const Tensor& x) override {
    Tensor y = bn1_->forward(conv1_->forward(x));
    if (!fuse_bn_relu_) y = y.relu();
    for (auto& stage : stages_) y = stage->forward(y);
    return linear_->forward(pool_->forward(y).flatten(1));
  }

 private:
  std::shared_ptr<nn::Conv3d> conv1_;
  std::shared_ptr<nn::BatchNorm3d> bn1_;
  std::shared_ptr<nn::Sequential> stages_[4];
  std::shared_ptr<nn::AdaptiveAvgPool3d> pool_;
  std::shared_ptr<nn::Linear> linear_;
  bool fuse_bn_relu_;
};

}  // namespace kiln::bench
