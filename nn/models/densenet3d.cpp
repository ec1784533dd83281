// DenseNet3d (densenet3d.h): dense layers (plain or under checkpoint), dense blocks,
// transitions, the two stems and heads, and the two naming layouts.
#include "nn/models/densenet3d.h"

#include <cmath>

#include "core/autograd/checkpoint.h"
#include "core/error.h"
#include "core/ops/shape.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/pooling.h"

namespace kiln::nn::models {
namespace {

// "norm, act": the norm with the ReLU fused in and an Identity in the activation's place
// (its name and index kept), or the norm and the activation.
struct NormAct {
  std::shared_ptr<Layer> norm, act;
};

std::shared_ptr<Layer> activation(DenseNet3dActivation kind) {
  switch (kind) {
    case DenseNet3dActivation::Swish:
      return std::make_shared<SiLU>();
    case DenseNet3dActivation::PReLU:
      return std::make_shared<PReLU>();
    case DenseNet3dActivation::ReLU:
      break;
  }
  return std::make_shared<ReLU>();
}

NormAct norm_act(const DenseNet3dOptions& o, int64_t channels) {
  if (o.fused_bn_relu) return {batch_norm3d(channels, true), std::make_shared<Identity>()};
  return {batch_norm3d(channels), activation(o.activation)};
}

// One dense layer: its input is the block's feature maps so far; it returns growth_rate
// new channels. MONAI names its modules under `layers`; torchvision directly.
class DenseLayer3d : public Layer {
 public:
  DenseLayer3d(const DenseNet3dOptions& o, int64_t in_channels) : memory_efficient_(o.memory_efficient) {
    const int64_t width = o.bn_size * o.growth_rate;
    std::shared_ptr<Sequential> layers;
    if (o.naming == DenseNet3dNaming::MONAI)
      layers = register_module("layers", std::make_shared<Sequential>());
    const auto add = [&](const std::string& name, std::shared_ptr<Layer> layer) {
      if (layers) {
        layers->push_back(name, layer);
      } else {
        register_module(name, layer);
      }
      return layer;
    };
    const NormAct first = norm_act(o, in_channels);
    norm1_ = add("norm1", first.norm);
    act1_ = add("relu1", first.act);
    conv1_ = add("conv1", conv3d_no_bias(in_channels, width, {1}));
    const NormAct second = norm_act(o, width);
    norm2_ = add("norm2", second.norm);
    act2_ = add("relu2", second.act);
    if (o.depthwise_separable) {
      auto separable = std::make_shared<Sequential>();
      separable->push_back("depthwise", conv3d_no_bias(width, width, {3}, {1}, {1}, {1}, width));
      separable->push_back("norm", batch_norm3d(width));
      separable->push_back("pointwise", conv3d_no_bias(width, o.growth_rate, {1}));
      conv2_ = add("conv2", separable);
    } else {
      conv2_ = add("conv2", conv3d_no_bias(width, o.growth_rate, {3}, {1}, {1}));
    }
    if (o.drop_rate > 0)
      dropout_ = add("dropout", std::make_shared<Dropout3d>(DropoutOptions{.p = o.drop_rate}));
  }

  // The growth_rate new channels from the block's feature maps so far.
  Tensor new_features(const std::vector<Tensor>& features) {
    // Note [Memory-efficient DenseNet]: everything up to conv2's input, recomputed in
    // backward in the memory-efficient mode.
    const auto bottleneck = [this](const std::vector<Tensor>& maps) {
      const Tensor b = conv1_->forward(act1_->forward(norm1_->forward(cat(maps, 1))));
      return std::vector<Tensor>{act2_->forward(norm2_->forward(b))};
    };
    const Tensor b = memory_efficient_ ? checkpoint(bottleneck, features)[0] : bottleneck(features)[0];
    const Tensor y = conv2_->forward(b);
    return dropout_ ? dropout_->forward(y) : y;
  }
  // MONAI's _DenseLayer: [x, new_features(x)] concatenated.
  Tensor forward(const Tensor& x) override { return cat({x, new_features({x})}, 1); }
  std::string type_name() const override { return "DenseLayer"; }

 private:
  bool memory_efficient_;
  std::shared_ptr<Layer> norm1_, act1_, conv1_, norm2_, act2_, conv2_, dropout_;
};

// denselayer1..L; the output is the block's input and every layer's new channels, one
// concatenation at the end (each layer concatenates what it reads itself).
class DenseBlock3d : public Layer {
 public:
  DenseBlock3d(const DenseNet3dOptions& o, int64_t layers, int64_t in_channels) {
    for (int64_t i = 0; i < layers; ++i) {
      layers_.push_back(register_module("denselayer" + std::to_string(i + 1),
                                        std::make_shared<DenseLayer3d>(o, in_channels + i * o.growth_rate)));
    }
  }
  Tensor forward(const Tensor& x) override {
    std::vector<Tensor> features = {x};
    for (const auto& layer : layers_) features.push_back(layer->new_features(features));
    return cat(features, 1);
  }
  std::string type_name() const override { return "DenseBlock"; }

 private:
  std::vector<std::shared_ptr<DenseLayer3d>> layers_;
};

std::shared_ptr<Sequential> transition(const DenseNet3dOptions& o, int64_t in_channels,
                                       int64_t out_channels) {
  auto t = std::make_shared<Sequential>();
  const NormAct na = norm_act(o, in_channels);
  t->push_back("norm", na.norm);
  t->push_back("relu", na.act);
  t->push_back("conv", conv3d_no_bias(in_channels, out_channels, {1}));
  t->push_back("pool", std::make_shared<AvgPool3d>(AvgPool3dOptions{.kernel_size = {2}, .stride = {2}}));
  return t;
}

void check_options(const DenseNet3dOptions& o) {
  KILN_CHECK(o.in_channels > 0 && o.num_classes > 0,
             "DenseNet3d: in_channels and num_classes must be positive, ", "got ", o.in_channels, " and ",
             o.num_classes);
  KILN_CHECK(o.init_features > 0 && o.growth_rate > 0 && o.bn_size > 0,
             "DenseNet3d: init_features, growth_rate and bn_size must be positive, got ", o.init_features,
             ", ", o.growth_rate, " and ", o.bn_size);
  KILN_CHECK(o.compression > 0 && o.compression <= 1, "DenseNet3d: compression must be in (0, 1], got ",
             o.compression);
  KILN_CHECK(o.drop_rate >= 0 && o.drop_rate < 1, "DenseNet3d: drop_rate must be in [0, 1), got ",
             o.drop_rate);
  KILN_CHECK(!o.fused_bn_relu || o.activation == DenseNet3dActivation::ReLU,
             "DenseNet3d: fused_bn_relu fuses a ReLU: it needs activation = ReLU");
}

}  // namespace

std::vector<int64_t> densenet3d_blocks(int64_t depth) {
  switch (depth) {
    case 121:
      return {6, 12, 24, 16};
    case 169:
      return {6, 12, 32, 32};
    case 201:
      return {6, 12, 48, 32};
    case 264:
      return {6, 12, 64, 48};
    default:
      KILN_CHECK(false, "DenseNet3d: depth must be 121, 169, 201 or 264, got ", depth);
  }
  return {};
}

DenseNet3d::DenseNet3d(const DenseNet3dOptions& options) : options_(options) {
  check_options(options);
  const std::vector<int64_t> blocks = densenet3d_blocks(options.depth);
  auto features = std::make_shared<Sequential>();
  const bool small = options.stem == DenseNet3dStem::SmallInput;
  features->push_back("conv0", conv3d_no_bias(options.in_channels, options.init_features, {small ? 3 : 7},
                                              {small ? 1 : 2}, {small ? 1 : 3}));
  const NormAct stem = norm_act(options, options.init_features);
  features->push_back("norm0", stem.norm);
  features->push_back("relu0", stem.act);
  if (!small) {
    features->push_back("pool0", std::make_shared<MaxPool3d>(
                                     MaxPool3dOptions{.kernel_size = {3}, .stride = {2}, .padding = {1}}));
  }
  int64_t channels = options.init_features;
  for (size_t i = 0; i < blocks.size(); ++i) {
    features->push_back("denseblock" + std::to_string(i + 1),
                        std::make_shared<DenseBlock3d>(options, blocks[i], channels));
    channels += blocks[i] * options.growth_rate;
    if (i + 1 == blocks.size()) {
      features->push_back("norm5", batch_norm3d(channels));
    } else {
      const auto kept = static_cast<int64_t>(std::floor(static_cast<double>(channels) * options.compression));
      KILN_CHECK(kept > 0, "DenseNet3d: compression ", options.compression,
                 " leaves no channels after block ", i + 1);
      features->push_back("transition" + std::to_string(i + 1), transition(options, channels, kept));
      channels = kept;
    }
  }
  feature_channels_ = channels;
  features_ = register_module("features", features);
  auto linear =
      std::make_shared<Linear>(LinearOptions{.in_features = channels, .out_features = options.num_classes});
  if (options.naming == DenseNet3dNaming::MONAI) {
    auto head = std::make_shared<Sequential>();
    head->push_back("relu", activation(options.activation));
    head->push_back("pool",
                    std::make_shared<AdaptiveAvgPool3d>(AdaptiveAvgPool3dOptions{.output_size = {1}}));
    head->push_back("flatten", std::make_shared<Flatten>());
    head->push_back("out", linear);
    head_ = register_module("class_layers", head);
  } else {
    head_ = register_module("classifier", linear);
  }
  initialise(*this, ConvInit::KaimingNormalFanIn, /*zero_linear_bias=*/true, options.generator);
}

Tensor DenseNet3d::features(const Tensor& input) {
  KILN_CHECK(input.defined() && input.dim() == 5 && input.size(1) == options_.in_channels,
             "DenseNet3d: expected an input [N, ", options_.in_channels, ", D, H, W], got shape ",
             sizes_or_none(input));
  return features_->forward(input);
}

Tensor DenseNet3d::forward(const Tensor& input) {
  const Tensor y = features(input);
  if (options_.naming == DenseNet3dNaming::MONAI) return head_->forward(y);
  // torchvision's forward: relu, global average pool, flatten, classifier.
  return head_->forward(y.relu().mean({2, 3, 4}));
}

}  // namespace kiln::nn::models
