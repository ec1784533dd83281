// Models by name, for the `kiln` command and configuration files: "resnet18",
// "densenet121", ... with the choices a command line offers (stem, width, memory-efficient
// DenseNet, depthwise-separable convs, activation, dropout, checkpointed stages).
//
//   auto model = nn::models::model_by_name({.name = "resnet18", .num_classes = 2});
//
// Note [Model names]:
//   resnet10, resnet18, resnet34, resnet50, resnet101, resnet152, resnet200
//       stem "medmnist" (default: the MedMNIST v2 benchmark's 3x3x3 stride-1 stem, no
//       max-pool, for 28^3 and 64^3 volumes) or "medicalnet" (7x7x7 stride 2 + max-pool,
//       Med3D's classification network); `width` scales every stage (widen_factor);
//       `checkpoint_activations` checkpoints each stage.
//   densenet121, densenet169, densenet201, densenet264
//       stem "standard" (default: 7x7x7 stride 2 + max-pool) or "small" (3x3x3 stride 1,
//       for 28^3); `width` scales the initial features and the growth rate;
//       `memory_efficient` or `checkpoint_activations` checkpoint each dense layer;
//       `depthwise_separable`; `activation` relu, swish or prelu.
// An option a model does not have (a DenseNet activation on a ResNet, say) is an error
// naming it, so a configuration never silently means something else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace kiln::nn::models {

struct ModelSpec {
  std::string name = "resnet18";
  int64_t in_channels = 1;
  int64_t num_classes = 2;
  std::string stem = "";  // empty: the model's default (Note [Model names])
  double width = 1.0;
  double dropout = 0.0;  // ResNet: before the classifier; DenseNet: after each dense layer
  bool checkpoint_activations = false;
  bool memory_efficient = false;     // DenseNet
  bool depthwise_separable = false;  // DenseNet
  std::string activation = "relu";   // DenseNet: relu, swish or prelu
  bool fused_bn_relu = false;
};

// The model `spec` describes, initialised from the default generator; an unknown name or
// an option the model lacks is a kiln::Error listing what is valid.
std::shared_ptr<Layer> model_by_name(const ModelSpec& spec);

// Every name model_by_name takes, in the order of Note [Model names].
std::vector<std::string> model_names();

}  // namespace kiln::nn::models
