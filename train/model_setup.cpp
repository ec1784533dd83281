// make_model (train/model_setup.h).
#include "train/model_setup.h"

#include "core/error.h"
#include "core/generator.h"
#include "core/safetensors.h"
#include "data/pth.h"
#include "nn/load_report.h"
#include "nn/models/by_name.h"
#include "train/checkpoint.h"
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
  safetensors::Loaded loaded = safetensors::load(path);
  if (loaded.metadata.count(kCheckpointMetadataKey) != 0)  // a training checkpoint: its model's weights
    return tensors_under(loaded.tensors, prefix::kModel);
  return std::move(loaded.tensors);
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
    const size_t tensors = setup.model->state_dict().size();
    const nn::LoadReport report = nn::load_state_dict_mapped(*setup.model, read_weights(config.pretrained));
    setup.load_report = report.to_string();
    // Note [A partial start]: weights that fill less than half of the model are a different
    // model's far more often than a head replaced on purpose; training would start mostly
    // from random weights without a word.
    KILN_CHECK(2 * report.loaded >= tensors || config.pretrained_partial, "--pretrained ", config.pretrained,
               " fills only ", report.loaded, " of the ", tensors, " tensors of ", config.model, " (",
               report.result.mismatched_keys.size(), " of another shape, ", report.result.missing_keys.size(),
               " missing): weights of another model? Give --pretrained-partial to start from them anyway");
  }
  return setup;
}

}  // namespace kiln::train
