// A trained model rebuilt from its weights, for `kiln eval` and `kiln predict`: the
// configuration the weights carry (best.safetensors and final.safetensors of `kiln train`
// do: Trainer's kWeightsConfigKey), overridden by flags; the model built from it and loaded
// strictly (a file for another model is an error listing what did not fit), on the device,
// cast for the run's mixed precision; and the objective that turns its outputs into scores.
//
//   train::TrainConfig config;
//   read_weights_config(weights, config);          // then flags over it
//   TrainedModel trained = load_trained_model(weights, config, choices, info);
#pragma once

#include <memory>
#include <string>

#include "nn/layer.h"
#include "train/amp.h"
#include "train/config.h"
#include "train/objective.h"
#include "train/task.h"

namespace kiln::tools {

struct TrainedModel {
  std::shared_ptr<nn::Layer> model;
  Device device;
  train::AmpProperties amp;
  std::unique_ptr<train::Objective> objective;
};

// The configuration a Kiln weights file carries, into `config`; false, with `config` as it
// was, for a file that carries none (PyTorch's, or weights saved outside kiln train).
bool read_weights_config(const std::string& weights, train::TrainConfig& config);

// What the weights say the model predicts (train/task.h: ModelInfo); an error naming the
// file when it does not say (weights not written by kiln train).
train::ModelInfo read_model_info(const std::string& weights);

// The model of `config` for `info`, the weights loaded strictly, on config.device.
TrainedModel load_trained_model(const std::string& weights, const train::TrainConfig& config,
                                const train::Choices& choices, const train::ModelInfo& info);

}  // namespace kiln::tools
