// read_weights_config, read_model_info and load_trained_model (tools/trained_model.h).
#include "tools/trained_model.h"

#include "core/error.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "nn/load_report.h"
#include "train/model_setup.h"
#include "train/checkpoint.h"
#include "train/run_checkpoints.h"
#include "train/run_context.h"

namespace kiln::tools {

bool read_weights_config(const std::string& weights, train::TrainConfig& config) {
  if (train::is_pytorch_checkpoint(weights)) return false;  // only Kiln's own files carry a configuration
  const safetensors::Header header = safetensors::read_header(weights);
  if (const auto found = header.metadata.find(train::kWeightsConfigKey); found != header.metadata.end()) {
    train::update_from_json(config, json::parse(found->second), weights + " (its configuration)");
  } else if (const auto state = header.metadata.find(train::kCheckpointMetadataKey); state != header.metadata.end()) {
    // A training checkpoint given as weights: its run's configuration, and (read_weights) its model.
    const json::Value parsed = json::parse(state->second);
    const json::Value* saved = parsed.find("config");
    KILN_CHECK(saved != nullptr, weights, ": a training checkpoint without its configuration");
    train::update_from_json(config, *saved, weights + " (its configuration)");
  } else {
    return false;
  }
  config.pretrained.clear();  // the run's starting point; the weights given replace it
  config.resume.clear();      // the run's; nothing here resumes
  return true;
}

train::ModelInfo read_model_info(const std::string& weights) {
  const safetensors::Header header = safetensors::read_header(weights);
  const auto value = [&](const char* key) {
    const auto found = header.metadata.find(key);
    KILN_CHECK(found != header.metadata.end(), weights, ": the weights do not say what the model predicts (no \"",
               key, "\" metadata); they were not written by kiln train");
    return found->second;
  };
  train::ModelInfo info;
  info.task = train::parse_choice<train::Task>(value(train::kWeightsTaskKey));
  const json::Value names = json::parse(value(train::kWeightsClassesKey));
  KILN_CHECK(names.is(json::Type::Array), weights, ": \"", train::kWeightsClassesKey, "\" is not a JSON array");
  for (const json::Value& name : names.as_array()) {
    KILN_CHECK(name.is(json::Type::String), weights, ": \"", train::kWeightsClassesKey, "\" holds a non-string");
    info.class_names.push_back(name.as_string());
  }
  info.classes = static_cast<int64_t>(info.class_names.size());
  try {
    info.channels = std::stoll(value(train::kWeightsChannelsKey));
  } catch (const std::logic_error&) {
    info.channels = 0;
  }
  KILN_CHECK(info.channels >= 1 && info.classes >= 1, weights, ": its metadata gives ", info.channels,
             " input channels and ", info.classes, " outputs");
  return info;
}

TrainedModel load_trained_model(const std::string& weights, const train::TrainConfig& config,
                                const train::Choices& choices, const train::ModelInfo& info) {
  train::TrainData shape;  // what the model is built for: its task, outputs and channels
  shape.task = info.task;
  shape.classes = info.classes;
  shape.channels = info.channels;
  TrainedModel trained;
  trained.model = train::make_model(config, shape).model;
  const nn::LoadStateDictResult loaded = nn::load_state_dict_mapped(*trained.model, train::read_weights(weights)).result;
  if (!loaded.ok()) {
    const std::string example = !loaded.missing_keys.empty()      ? "missing " + loaded.missing_keys[0]
                                : !loaded.unexpected_keys.empty() ? "unexpected " + loaded.unexpected_keys[0]
                                                                  : "a shape differs: " + loaded.mismatched_keys[0].name;
    throw Error("--weights " + weights + " does not fit model " + config.model + ": " +
                std::to_string(loaded.missing_keys.size()) + " keys missing, " +
                std::to_string(loaded.unexpected_keys.size()) + " unexpected, " +
                std::to_string(loaded.mismatched_keys.size()) + " of another shape (" + example +
                "); say which model it is with --model, --width, ...");
  }
  trained.device = train::resolve_device(config.device);
  trained.model->to(trained.device);
  trained.amp = train::amp_properties(choices.amp, train::to_dtype(choices.amp_dtype, trained.device));
  train::amp_cast_model(*trained.model, trained.amp);
  train::LossSettings scoring = train::LossSettings::of(config, choices.loss);
  scoring.pos_weight.clear();  // weighs the loss, not the scores
  trained.objective = std::make_unique<train::Objective>(scoring, info.task, info.classes, std::vector<int64_t>{},
                                                         trained.device);
  return trained;
}

}  // namespace kiln::tools
