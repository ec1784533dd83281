// make_model (train/model_setup.h).
#include "train/model_setup.h"

#include "core/generator.h"
#include "core/safetensors.h"
#include "data/pth.h"
#include "nn/load_report.h"
#include "nn/models/by_name.h"
#include "train/objective.h"

namespace kiln::train {

int64_t model_outputs(const TrainConfig& config, const TrainData& data) {
  return loss_outputs(resolved_loss(parse_choice<LossChoice>(config.loss), data.task), data.task, data.classes);
}

bool is_pytorch_checkpoint(const std::string& path) {
  return path.ends_with(".pth") || path.ends_with(".pt") || path.ends_with(".ckpt");
}

nn::StateDict read_weights(const std::string& path) {
  if (is_pytorch_checkpoint(path)) return data::pth::state_dict(data::pth::load(path));
  return safetensors::load(path).tensors;
}

ModelSetup make_model(const TrainConfig& config, const TrainData& data) {
  manual_seed(static_cast<uint64_t>(config.seed));
  ModelSetup setup;
  setup.model = nn::models::model_by_name({.name = config.model,
                                           .in_channels = data.channels,
                                           .num_classes = model_outputs(config, data),
                                           .stem = config.stem,
                                           .width = config.width,
                                           .dropout = config.dropout,
                                           .checkpoint_activations = config.checkpoint_activations,
                                           .memory_efficient = config.memory_efficient,
                                           .depthwise_separable = config.dsconv,
                                           .activation = config.activation,
                                           .fused_bn_relu = config.fused_bn_relu});
  if (!config.pretrained.empty()) {
    setup.load_report = nn::load_state_dict_mapped(*setup.model, read_weights(config.pretrained)).to_string();
  }
  return setup;
}

}  // namespace kiln::train
