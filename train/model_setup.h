// The model of a run from its configuration: the default generators seeded with the run's
// seed (so the initialisation is the seed's), the model by name (nn/models/by_name.h) with
// as many outputs as the objective needs, and --pretrained weights loaded by name.
//
//   train::ModelSetup setup = train::make_model(config, data);
//   std::cout << setup.load_report;  // empty without --pretrained
#pragma once

#include <memory>
#include <string>

#include "nn/layer.h"
#include "train/config.h"
#include "train/data_setup.h"

namespace kiln::train {

struct ModelSetup {
  std::shared_ptr<nn::Layer> model;
  std::string load_report;  // what --pretrained loaded and did not (nn/load_report.h)
};

// With --pretrained, weights filling less than half of the model's tensors are an error
// unless --pretrained-partial (Note [A partial start] in model_setup.cpp).
ModelSetup make_model(const TrainConfig& config, const TrainData& data);

// The model's outputs for the configuration's loss on the data's task (train/objective.h).
int64_t model_outputs(const TrainConfig& config, const TrainData& data);

// A weights file as a state dict: safetensors (a Kiln training checkpoint's model weights
// when it is one), or a PyTorch checkpoint (.pth, .pt, .ckpt: its state dict, read by the
// restricted unpickler).
nn::StateDict read_weights(const std::string& path);
// Whether read_weights reads `path` as a PyTorch checkpoint (.pth, .pt, .ckpt).
bool is_pytorch_checkpoint(const std::string& path);

}  // namespace kiln::train
