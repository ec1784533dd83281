// model_by_name: the name's family and depth, then that family's options from the spec
// (Note [Model names] in nn/models/by_name.h).
#include "nn/models/by_name.h"

#include <cmath>

#include "core/error.h"
#include "nn/models/densenet3d.h"
#include "nn/models/resnet3d.h"

namespace kiln::nn::models {
namespace {

constexpr int64_t kResNetDepths[] = {10, 18, 34, 50, 101, 152, 200};
constexpr int64_t kDenseNetDepths[] = {121, 169, 201, 264};

std::string names_list() {
  std::string list;
  for (const std::string& name : model_names()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

// The depth after `prefix` when name is prefix + one of `depths`, else 0.
template <size_t N>
int64_t depth_of(const std::string& name, const std::string& prefix, const int64_t (&depths)[N]) {
  if (name.rfind(prefix, 0) != 0) return 0;
  for (const int64_t depth : depths) {
    if (name.substr(prefix.size()) == std::to_string(depth)) return depth;
  }
  return 0;
}

std::shared_ptr<Layer> resnet(const ModelSpec& spec, int64_t depth) {
  KILN_CHECK(!spec.memory_efficient && !spec.depthwise_separable && spec.activation == "relu", "model ",
             spec.name,
             ": memory-efficient mode, depthwise-separable convs and other activations are DenseNet options");
  KILN_CHECK(spec.stem.empty() || spec.stem == "medmnist" || spec.stem == "medicalnet", "model ", spec.name,
             ": the stem is medmnist or medicalnet, got '", spec.stem, "'");
  return std::make_shared<ResNet3d>(ResNet3dOptions{
      .depth = depth,
      .in_channels = spec.in_channels,
      .num_classes = spec.num_classes,
      .family = spec.stem == "medicalnet" ? ResNet3dFamily::MedicalNet : ResNet3dFamily::MedMNIST,
      .widen_factor = spec.width,
      .dilated_layers = false,
      .dropout = spec.dropout,
      .fused_bn_relu = spec.fused_bn_relu,
      .checkpoint_stages = spec.checkpoint_activations});
}

DenseNet3dActivation densenet_activation(const ModelSpec& spec) {
  if (spec.activation == "relu") return DenseNet3dActivation::ReLU;
  if (spec.activation == "swish") return DenseNet3dActivation::Swish;
  if (spec.activation == "prelu") return DenseNet3dActivation::PReLU;
  throw Error("model " + spec.name + ": the activation is relu, swish or prelu, got '" + spec.activation +
              "'");
}

std::shared_ptr<Layer> densenet(const ModelSpec& spec, int64_t depth) {
  KILN_CHECK(spec.stem.empty() || spec.stem == "standard" || spec.stem == "small", "model ", spec.name,
             ": the stem is standard or small, got '", spec.stem, "'");
  KILN_CHECK(std::isfinite(spec.width) && spec.width > 0, "model ", spec.name,
             ": the width must be positive, got ", spec.width);
  const DenseNet3dOptions defaults;
  const auto scaled = [&spec](int64_t value) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::lround(static_cast<double>(value) * spec.width)));
  };
  return std::make_shared<DenseNet3d>(
      DenseNet3dOptions{.depth = depth,
                        .in_channels = spec.in_channels,
                        .num_classes = spec.num_classes,
                        .init_features = scaled(defaults.init_features),
                        .growth_rate = scaled(defaults.growth_rate),
                        .drop_rate = spec.dropout,
                        .stem = spec.stem == "small" ? DenseNet3dStem::SmallInput : DenseNet3dStem::Standard,
                        .activation = densenet_activation(spec),
                        .depthwise_separable = spec.depthwise_separable,
                        .memory_efficient = spec.memory_efficient || spec.checkpoint_activations,
                        .fused_bn_relu = spec.fused_bn_relu});
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const int64_t depth : kResNetDepths) names.push_back("resnet" + std::to_string(depth));
  for (const int64_t depth : kDenseNetDepths) names.push_back("densenet" + std::to_string(depth));
  return names;
}

std::shared_ptr<Layer> model_by_name(const ModelSpec& spec) {
  if (const int64_t depth = depth_of(spec.name, "resnet", kResNetDepths)) return resnet(spec, depth);
  if (const int64_t depth = depth_of(spec.name, "densenet", kDenseNetDepths)) return densenet(spec, depth);
  throw Error("unknown model '" + spec.name + "' (the models are " + names_list() + ")");
}

}  // namespace kiln::nn::models
