// ResNet3d (resnet3d.h): the two block types, the two shortcut types, the stems, the
// heads, and the depth table.
#include "nn/models/resnet3d.h"

#include <cmath>

#include "core/autograd/checkpoint.h"
#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/shape.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/pooling.h"

namespace kiln::nn::models {
namespace {

// A "bn, relu" pair's relu, unless the batch norm fuses it.
Tensor relu_unless_fused(const Tensor& x, bool fused) { return fused ? x : x.relu(); }

// Type A (Note [Shortcut A's gradient]): x subsampled by the stride (MedicalNet's
// avg_pool3d with kernel 1), then zero channels up to `out_channels`. No parameters.
class ZeroPadShortcut : public Layer {
 public:
  ZeroPadShortcut(int64_t stride, int64_t out_channels) : stride_(stride), out_channels_(out_channels) {}
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (int64_t d = 2; d < x.dim(); ++d) y = y.slice(d, 0, std::nullopt, stride_);
    if (y.size(1) == out_channels_) return y;
    std::vector<int64_t> pad_sizes = y.sizes();
    pad_sizes[1] = out_channels_ - y.size(1);
    return cat({y, zeros(pad_sizes, {.dtype = y.dtype(), .device = y.device()})}, 1);
  }
  std::string type_name() const override { return "ZeroPadShortcut"; }
  std::string extra_repr() const override {
    return "stride=" + std::to_string(stride_) + ", out_channels=" + std::to_string(out_channels_);
  }

 private:
  int64_t stride_, out_channels_;
};

// Where a block's stride or width changes: type B (1x1x1 conv + BN) or type A; null where
// neither changes (the identity).
std::shared_ptr<Layer> make_shortcut(const ResNet3dOptions& options, int64_t in, int64_t out,
                                     int64_t stride) {
  if (stride == 1 && in == out) return nullptr;
  if (options.shortcut_type == ShortcutType::A) return std::make_shared<ZeroPadShortcut>(stride, out);
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Layer>>{
      conv3d_no_bias(in, out, {1}, {stride}), batch_norm3d(out)});
}

const char* shortcut_name(const ResNet3dOptions& options) {
  return options.family == ResNet3dFamily::MedicalNet ? "downsample" : "shortcut";
}

// A residual block: its branch, whose last batch norm is followed by + shortcut(x) and
// relu; with fused_bn_relu that tail is one fused op (BatchNorm3d::forward_add_relu).
class ResidualBlock : public Layer {
 public:
  explicit ResidualBlock(bool fused) : fused_(fused) {}
  Tensor forward(const Tensor& x) override {
    const Tensor y = branch(x);
    if (fused_) return last_norm().forward_add_relu(y, shortcut(x));
    const Tensor normalized = last_norm().forward(y);
    return normalized.add(shortcut(x)).relu();
  }
  // The last batch norm of the branch (zero_init_residual sets its weight to 0).
  virtual BatchNorm3d& last_norm() = 0;

 protected:
  // The branch up to its last batch norm's input.
  virtual Tensor branch(const Tensor& x) = 0;
  const bool fused_;  // every bn-relu pair fused, and the tail
  Tensor shortcut(const Tensor& x) { return shortcut_ ? shortcut_->forward(x) : x; }
  void register_shortcut(const ResNet3dOptions& options, int64_t in, int64_t out, int64_t stride) {
    shortcut_ = make_shortcut(options, in, out, stride);
    if (shortcut_) register_module(shortcut_name(options), shortcut_);
  }

 private:
  std::shared_ptr<Layer> shortcut_;
};

// 3x3x3 (stride, dilation) -> BN -> relu -> 3x3x3 (dilation) -> BN.
class BasicBlock3d : public ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock3d(const ResNet3dOptions& options, int64_t in, int64_t planes, int64_t stride, int64_t dilation)
      : ResidualBlock(options.fused_bn_relu) {
    conv1_ = register_module("conv1", conv3d_no_bias(in, planes, {3}, {stride}, {dilation}, {dilation}));
    bn1_ = register_module("bn1", batch_norm3d(planes, fused_));
    conv2_ = register_module("conv2", conv3d_no_bias(planes, planes, {3}, {1}, {dilation}, {dilation}));
    bn2_ = register_module("bn2", batch_norm3d(planes));
    register_shortcut(options, in, planes, stride);
  }
  std::string type_name() const override { return "BasicBlock"; }
  BatchNorm3d& last_norm() override { return *bn2_; }

 protected:
  Tensor branch(const Tensor& x) override {
    const Tensor y = relu_unless_fused(bn1_->forward(conv1_->forward(x)), fused_);
    return conv2_->forward(y);
  }

 private:
  std::shared_ptr<Conv3d> conv1_, conv2_;
  std::shared_ptr<BatchNorm3d> bn1_, bn2_;
};

// 1x1x1 -> BN -> relu -> 3x3x3 (stride, dilation) -> BN -> relu -> 1x1x1 (x4) -> BN.
class Bottleneck3d : public ResidualBlock {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck3d(const ResNet3dOptions& options, int64_t in, int64_t planes, int64_t stride, int64_t dilation)
      : ResidualBlock(options.fused_bn_relu) {
    conv1_ = register_module("conv1", conv3d_no_bias(in, planes, {1}));
    bn1_ = register_module("bn1", batch_norm3d(planes, fused_));
    conv2_ = register_module("conv2", conv3d_no_bias(planes, planes, {3}, {stride}, {dilation}, {dilation}));
    bn2_ = register_module("bn2", batch_norm3d(planes, fused_));
    conv3_ = register_module("conv3", conv3d_no_bias(planes, planes * kExpansion, {1}));
    bn3_ = register_module("bn3", batch_norm3d(planes * kExpansion));
    register_shortcut(options, in, planes * kExpansion, stride);
  }
  std::string type_name() const override { return "Bottleneck"; }
  BatchNorm3d& last_norm() override { return *bn3_; }

 protected:
  Tensor branch(const Tensor& x) override {
    Tensor y = relu_unless_fused(bn1_->forward(conv1_->forward(x)), fused_);
    y = relu_unless_fused(bn2_->forward(conv2_->forward(y)), fused_);
    return conv3_->forward(y);
  }

 private:
  std::shared_ptr<Conv3d> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm3d> bn1_, bn2_, bn3_;
};

int64_t widened(int64_t width, double factor) {
  return static_cast<int64_t>(static_cast<double>(width) * factor);
}

void check_options(const ResNet3dOptions& o) {
  KILN_CHECK(o.in_channels > 0 && o.num_classes > 0,
             "ResNet3d: in_channels and num_classes must be positive, got ", o.in_channels, " and ",
             o.num_classes);
  KILN_CHECK(o.widen_factor > 0 && widened(64, o.widen_factor) >= 1 && o.widen_factor <= 64,
             "ResNet3d: widen_factor must be in (0, 64] and leave the first width at least 1, got ",
             o.widen_factor);
  KILN_CHECK(o.dropout >= 0 && o.dropout < 1, "ResNet3d: dropout must be in [0, 1), got ", o.dropout);
  KILN_CHECK(!o.stem_depth_stride || *o.stem_depth_stride > 0,
             "ResNet3d: stem_depth_stride must be positive, got ", o.stem_depth_stride.value_or(0));
  if (o.family == ResNet3dFamily::MedMNIST) {
    KILN_CHECK(o.head == ResNet3dHead::Classification,
               "ResNet3d: the segmentation head (conv_seg) is MedicalNet's: use family = MedicalNet");
    KILN_CHECK(!o.dilated_layers.value_or(false),
               "ResNet3d: dilated layer3/layer4 are MedicalNet's: use family = MedicalNet");
  }
}

}  // namespace

std::vector<int64_t> resnet3d_blocks(int64_t depth) {
  switch (depth) {
    case 10:
      return {1, 1, 1, 1};
    case 18:
      return {2, 2, 2, 2};
    case 34:
      return {3, 4, 6, 3};
    case 50:
      return {3, 4, 6, 3};
    case 101:
      return {3, 4, 23, 3};
    case 152:
      return {3, 8, 36, 3};
    case 200:
      return {3, 24, 36, 3};
    default:
      KILN_CHECK(false, "ResNet3d: depth must be 10, 18, 34, 50, 101, 152 or 200, got ", depth);
  }
  return {};
}

bool resnet3d_uses_bottleneck(int64_t depth) { return depth >= 50; }

ResNet3d::ResNet3d(const ResNet3dOptions& options) : options_(options) {
  check_options(options);
  const std::vector<int64_t> blocks_per_layer = resnet3d_blocks(options.depth);
  bottleneck_ = resnet3d_uses_bottleneck(options.depth);
  const bool medicalnet = options.family == ResNet3dFamily::MedicalNet;
  const bool dilated =
      options.dilated_layers.value_or(medicalnet && options.head == ResNet3dHead::Segmentation);
  stages_ = dilated ? std::vector<Stage>{{1, 1}, {2, 1}, {1, 2}, {1, 4}}
                    : std::vector<Stage>{{1, 1}, {2, 1}, {2, 1}, {2, 1}};
  build_stem();
  for (size_t i = 0; i < 4; ++i) {
    const int64_t planes = widened(int64_t{64} << i, options.widen_factor);
    layers_.push_back(register_module("layer" + std::to_string(i + 1),
                                      make_layer(planes, blocks_per_layer[i], stages_[i])));
  }
  feature_channels_ = in_planes_;
  build_head();
  initialise(*this, options.init, /*zero_linear_bias=*/false, options.generator);
  if (options.zero_init_residual) {
    for (const auto& [name, module] : named_modules()) {
      if (auto* block = dynamic_cast<ResidualBlock*>(module.get())) init::zeros_(block->last_norm().weight);
    }
  }
}

void ResNet3d::build_stem() {
  const bool medicalnet = options_.family == ResNet3dFamily::MedicalNet;
  const int64_t in_plane_stride = medicalnet ? 2 : 1;
  const int64_t depth_stride = options_.stem_depth_stride.value_or(in_plane_stride);
  in_planes_ = widened(64, options_.widen_factor);
  conv1_ = register_module(
      "conv1", conv3d_no_bias(options_.in_channels, in_planes_, {medicalnet ? 7 : 3},
                              {depth_stride, in_plane_stride, in_plane_stride}, {medicalnet ? 3 : 1}));
  bn1_ = register_module("bn1", batch_norm3d(in_planes_, options_.fused_bn_relu));
  if (medicalnet) {
    register_module("relu", std::make_shared<ReLU>());
    maxpool_ =
        register_module("maxpool", std::make_shared<MaxPool3d>(MaxPool3dOptions{
                                       .kernel_size = {3}, .stride = {depth_stride, 2, 2}, .padding = {1}}));
  }
}

std::shared_ptr<Layer> ResNet3d::make_layer(int64_t planes, int64_t blocks, Stage stage) {
  auto layer = std::make_shared<Sequential>();
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t stride = i == 0 ? stage.stride : 1;
    if (bottleneck_) {
      layer->push_back(std::make_shared<Bottleneck3d>(options_, in_planes_, planes, stride, stage.dilation));
      in_planes_ = planes * Bottleneck3d::kExpansion;
    } else {
      layer->push_back(std::make_shared<BasicBlock3d>(options_, in_planes_, planes, stride, stage.dilation));
      in_planes_ = planes * BasicBlock3d::kExpansion;
    }
  }
  return layer;
}

// Segmentation: MedicalNet's conv_seg (Note [conv_seg's bias]). Classification: avgpool,
// dropout, and `fc` (MedicalNet family) or `linear` (MedMNIST's models.py).
void ResNet3d::build_head() {
  if (options_.head == ResNet3dHead::Segmentation) {
    const bool fused = options_.fused_bn_relu;
    const auto relu = [&]() -> std::shared_ptr<Layer> {
      if (fused) return std::make_shared<Identity>();  // keeps conv_seg's indices
      return std::make_shared<ReLU>();
    };
    auto up = std::make_shared<ConvTranspose3d>(ConvTranspose3dOptions{.in_channels = feature_channels_,
                                                                       .out_channels = 32,
                                                                       .kernel_size = {2},
                                                                       .stride = {2},
                                                                       .bias = false});
    head_name_ = "conv_seg";
    head_ = register_module(
        head_name_, std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Layer>>{
                        up, batch_norm3d(32, fused), relu(), conv3d_no_bias(32, 32, {3}, {1}, {1}),
                        batch_norm3d(32, fused), relu(), conv3d_no_bias(32, options_.num_classes, {1})}));
    return;
  }
  avgpool_ = register_module(
      "avgpool", std::make_shared<AdaptiveAvgPool3d>(AdaptiveAvgPool3dOptions{.output_size = {1}}));
  if (options_.dropout > 0) {
    dropout_ = register_module("dropout", std::make_shared<Dropout>(DropoutOptions{.p = options_.dropout}));
  }
  head_name_ = options_.family == ResNet3dFamily::MedicalNet ? "fc" : "linear";
  head_ = register_module(
      head_name_, std::make_shared<Linear>(
                      LinearOptions{.in_features = feature_channels_, .out_features = options_.num_classes}));
}

// A stage, under checkpoint when asked and a graph is being recorded (under NoGradGuard
// there is nothing to save, and checkpoint would only add a node).
Tensor ResNet3d::forward_stage(Layer& stage, const Tensor& x) {
  if (!options_.checkpoint_stages || !autograd::grad_mode_enabled()) return stage.forward(x);
  return checkpoint([&stage](const std::vector<Tensor>& inputs) { return std::vector<Tensor>{stage.forward(inputs[0])}; },
                    {x})[0];
}

Tensor ResNet3d::features(const Tensor& input) {
  KILN_CHECK(input.defined() && input.dim() == 5 && input.size(1) == options_.in_channels,
             "ResNet3d: expected an input [N, ", options_.in_channels, ", D, H, W], got shape ",
             sizes_or_none(input));
  Tensor y = relu_unless_fused(bn1_->forward(conv1_->forward(input)), options_.fused_bn_relu);
  if (maxpool_) y = maxpool_->forward(y);
  for (const auto& layer : layers_) y = forward_stage(*layer, y);
  return y;
}

Tensor ResNet3d::forward(const Tensor& input) {
  Tensor y = features(input);
  if (avgpool_) y = avgpool_->forward(y).flatten(1);
  if (dropout_) y = dropout_->forward(y);
  return head_->forward(y);
}

void ResNet3d::replace_head(std::shared_ptr<Layer> head) {
  KILN_CHECK(head != nullptr, "ResNet3d::replace_head: the new head is null");
  replace_child(head_name_, head);
  head_ = std::move(head);
}

std::vector<int64_t> ResNet3d::feature_size(const std::vector<int64_t>& spatial) const {
  KILN_CHECK(spatial.size() == 3, "ResNet3d::feature_size: expected 3 spatial sizes, got ", spatial);
  const bool medicalnet = options_.family == ResNet3dFamily::MedicalNet;
  const int64_t in_plane_stride = medicalnet ? 2 : 1;
  std::vector<int64_t> size = spatial;
  for (size_t d = 0; d < 3; ++d) {
    const int64_t stem_stride =
        d == 0 ? options_.stem_depth_stride.value_or(in_plane_stride) : in_plane_stride;
    const int64_t kernel = medicalnet ? 7 : 3;
    size[d] = (size[d] + 2 * (kernel / 2) - kernel) / stem_stride + 1;
    if (medicalnet) size[d] = (size[d] + 2 - 3) / (d == 0 ? stem_stride : 2) + 1;  // the 3x3x3 max-pool
    // Each layer's strided 3x3x3 (padding = dilation) and 1x1x1 shortcut: (s - 1) / stride + 1.
    for (const Stage& stage : stages_) size[d] = (size[d] - 1) / stage.stride + 1;
  }
  return size;
}

}  // namespace kiln::nn::models
