// Training checkpoints (train/checkpoint.h): the safetensors file with its "kiln.checkpoint"
// metadata, the default generators' states, the same-run check and the run folder's
// checkpoint files.
#include "train/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "core/backend.h"
#include "core/error.h"
#include "core/generator.h"
#include "train/run_folder.h"
#include "train/schedule.h"

namespace kiln::train {
namespace {

constexpr const char* kMetadataKey = kCheckpointMetadataKey;
constexpr int64_t kFormat = 1;

namespace fs = std::filesystem;

// Every device whose default generator a run may have used.
std::vector<Device> generator_devices() {
  std::vector<Device> devices{Device::cpu()};
  if (cuda_is_available()) {
    for (int i = 0; i < cuda_device_count(); ++i) devices.push_back(Device::cuda(i));
  }
  return devices;
}

bool is_checkpoint_name(const std::string& name) {
  return name.starts_with("epoch-") && name.ends_with(".safetensors");
}

}  // namespace

SaveStatus write_checkpoint(const CheckpointContents& contents, const std::string& path) {
  const fs::path folder = fs::path(path).parent_path();
  if (!folder.empty()) {
    std::error_code error;
    fs::create_directories(folder, error);
    KILN_CHECK(!error, "checkpoint ", path, ": cannot create its folder: ", error.message());
  }
  return safetensors::save(contents.tensors, path, {{kMetadataKey, json::dump(contents.state)}});
}

CheckpointContents read_checkpoint(const std::string& path, Device device) {
  safetensors::Loaded loaded = safetensors::load(path, device);
  const auto found = loaded.metadata.find(kMetadataKey);
  KILN_CHECK(
      found != loaded.metadata.end(), "checkpoint ", path,
      ": not a Kiln training checkpoint (no \"kiln.checkpoint\" metadata; a weights file is loaded with "
      "--pretrained or --weights instead)");
  CheckpointContents contents{.tensors = std::move(loaded.tensors), .state = {}};
  try {
    contents.state = json::parse(found->second);
  } catch (const Error& e) {
    throw Error("checkpoint " + path + ": its \"kiln.checkpoint\" metadata is not valid JSON: " + e.what());
  }
  const json::Value* format = contents.state.find("format");
  KILN_CHECK(contents.state.is(json::Type::Object) && format != nullptr && format->is(json::Type::Integer) &&
                 format->as_integer() == kFormat,
             "checkpoint ", path, ": unknown checkpoint format (this Kiln reads format ", kFormat, ")");
  for (const char* key : kStateParts) {
    KILN_CHECK(contents.state.find(key) != nullptr, "checkpoint ", path, ": its state has no \"", key, "\"");
  }
  return contents;
}

json::Value checkpoint_state(StateParts parts) {
  json::Value state = json::Value::object({{"format", json::Value::integer(kFormat)}});
  for (size_t i = 0; i < parts.size(); ++i) state.add(kStateParts[i], std::move(parts[i]));
  return state;
}

const json::Value& state_part(const CheckpointContents& checkpoint, StatePart part) {
  return *checkpoint.state.find(kStateParts[static_cast<size_t>(part)]);
}

safetensors::NamedTensors tensors_under(const safetensors::NamedTensors& tensors, const std::string& prefix) {
  safetensors::NamedTensors selected;
  for (const auto& [name, tensor] : tensors) {
    if (name.starts_with(prefix)) selected.emplace_back(name.substr(prefix.size()), tensor);
  }
  return selected;
}

json::Value generator_states() {
  json::Value states = json::Value::object();
  for (const Device device : generator_devices()) {
    const PhiloxState state = default_generator(device).state();
    states.add(device.str(), json::Value::array({json::Value::string(std::to_string(state.seed)),
                                                 json::Value::string(std::to_string(state.offset))}));
  }
  return states;
}

void restore_generator_states(const json::Value& states, const std::string& source) {
  KILN_CHECK(states.is(json::Type::Object), source, ": \"generators\" is not an object");
  for (const auto& [name, value] : states.as_object()) {
    const Device device = Device::parse(name);
    KILN_CHECK(value.is(json::Type::Array) && value.as_array().size() == 2 &&
                   value.as_array()[0].is(json::Type::String) && value.as_array()[1].is(json::Type::String),
               source, ": generator ", name, " is not [seed, offset]");
    // A GPU generator saved on a machine with more GPUs than this one has nothing to restore.
    if (device.is_cuda() && (!cuda_is_available() || device.index >= cuda_device_count())) continue;
    try {
      default_generator(device).set_state({.seed = std::stoull(value.as_array()[0].as_string()),
                                           .offset = std::stoull(value.as_array()[1].as_string())});
    } catch (const std::logic_error&) {
      throw Error(source + ": generator " + name + " has a seed or offset that is not a number");
    }
  }
}

void check_same_run(const json::Value& saved_config, const TrainConfig& config, const std::string& source,
                    const std::string& what) {
  TrainConfig saved;
  update_from_json(saved, saved_config, source + " (its configuration)");
  std::string differences;
  // The run's length is part of a schedule laid out over it (schedule_depends_on_epochs).
  const Scheduler scheduler = parse_choice<Scheduler>(config.scheduler);
  if (schedule_depends_on_epochs(scheduler, config.milestones) && saved.epochs != config.epochs) {
    differences += "\n  epochs: the " + what + " has " + std::to_string(saved.epochs) + ", this run " +
                   std::to_string(config.epochs) + " (the " + config.scheduler +
                   " schedule is laid out over them)";
  }
  for (const ConfigField& field : config_fields()) {
    if (!field.identity) continue;
    const std::string was = field_text(saved, field), now = field_text(config, field);
    if (was != now)
      differences += std::string("\n  ") + field.name + ": the " + what + " has " + was + ", this run " + now;
  }
  KILN_CHECK(differences.empty(), source, " is a ", what, " of a different run; it differs in:", differences,
             "\n(use the ", what, "'s settings, or start a new run with --out elsewhere)");
}

std::string checkpoint_name(int64_t epoch, int64_t batch) {
  char name[64];
  if (batch == 0)
    std::snprintf(name, sizeof(name), "epoch-%04lld.safetensors", static_cast<long long>(epoch));
  else
    std::snprintf(name, sizeof(name), "epoch-%04lld-batch-%06lld.safetensors", static_cast<long long>(epoch),
                  static_cast<long long>(batch));
  return name;
}

std::vector<std::string> list_checkpoints(const std::string& run_dir) {
  std::vector<std::string> names;
  std::error_code error;
  const fs::path folder = RunFolder(run_dir).path(RunFile::Checkpoints);
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && is_checkpoint_name(name)) names.push_back(name);
  }
  // "epoch-0003.safetensors" (the epoch's end) sorts after "epoch-0003-batch-..." (mid-epoch
  // 3, which is epoch 3 in progress, i.e. after epoch 2's end) since '.' > '-'.
  std::sort(names.begin(), names.end());
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back((folder / name).string());
  return paths;
}

void prune_checkpoints(const std::string& run_dir, int64_t keep, const std::string& also_keep) {
  const std::vector<std::string> paths = list_checkpoints(run_dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max<int64_t>(keep, 1)) < paths.size(); ++i) {
    if (!also_keep.empty() && fs::path(paths[i]).filename() == also_keep) continue;
    std::error_code error;
    fs::remove(paths[i], error);  // a checkpoint that cannot be removed is only disk space
  }
}

}  // namespace kiln::train
