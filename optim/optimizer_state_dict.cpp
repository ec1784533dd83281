// The optimizer's state dict, in PyTorch's layout: parameters numbered 0, 1, ... across
// the groups in order; tensors "state.<index>.<name>" (with master weights also
// "state.<index>.master_weight"); the groups' options and parameter indices as JSON.
//
// Loading follows PyTorch: the saved groups are matched to this optimizer's groups in
// order, and the saved parameter indices to its parameters in order. Note [All-or-nothing
// loads]: everything is checked (group and parameter counts, option names and values,
// every tensor's name and shape), copied and allocated first, into a StagedLoad, and the
// commit swaps it in, so a failed check or an out-of-memory part-way loads nothing.
// Loaded tensors are copies, in the dtype and on the device of the tensor they belong to
// (a step counter: Float32 on the parameter's device), so a state dict can move between
// devices.
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "optim/optimizer.h"

namespace kiln::optim {
namespace {

constexpr const char* kMetadataKey = "kiln.optimizer";
constexpr const char* kMasterName = "master_weight";

// " (from <file>)" for the messages of a state dict read from a file.
std::string from(const OptimizerStateDict& state) {
  return state.source.empty() ? std::string() : " (from " + state.source + ")";
}

// "state.12.exp_avg" -> {12, "exp_avg"}; nullopt when the name has another form.
std::optional<std::pair<int64_t, std::string>> parse_state_name(const std::string& name) {
  const std::string_view prefix = "state.";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  int64_t index = -1;
  const auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end == first || end == last || *end != '.' || end + 1 == last || index < 0)
    return std::nullopt;
  return std::make_pair(index, std::string(end + 1, last));
}

// One saved group: its options and its saved parameter indices.
struct SavedGroup {
  Options options;
  std::vector<int64_t> params;
};

std::vector<SavedGroup> parse_groups(const json::Value& groups, const std::string& who, const std::string& src) {
  KILN_CHECK(groups.is(json::Type::Array), who, ".load_state_dict: param_groups must be a JSON array, got ",
             json::with_article(groups.type()), src);
  std::vector<SavedGroup> out;
  for (size_t g = 0; g < groups.as_array().size(); ++g) {
    const json::Value& group = groups.as_array()[g];
    KILN_CHECK(group.is(json::Type::Object), who, ".load_state_dict: param_groups[", g, "] must be an object, got ",
               json::with_article(group.type()), src);
    SavedGroup saved;
    bool has_params = false;
    for (const auto& [key, value] : group.as_object()) {
      if (key == "params") {
        KILN_CHECK(value.is(json::Type::Array), who, ".load_state_dict: param_groups[", g,
                   "].params must be an array, got ", json::with_article(value.type()), src);
        for (const json::Value& index : value.as_array()) {
          KILN_CHECK(index.is(json::Type::Integer), who, ".load_state_dict: param_groups[", g,
                     "].params holds ", json::with_article(index.type()), "; parameter indices are integers", src);
          saved.params.push_back(index.as_integer());
        }
        has_params = true;
      } else if (value.is(json::Type::Bool)) {
        saved.options[key] = value.as_bool() ? 1.0 : 0.0;
      } else {
        KILN_CHECK(value.is(json::Type::Integer) || value.is(json::Type::Number), who,
                   ".load_state_dict: option \"", key, "\" of param_groups[", g, "] must be a number, got ",
                   json::with_article(value.type()), src);
        saved.options[key] = value.as_number();
      }
    }
    KILN_CHECK(has_params, who, ".load_state_dict: param_groups[", g, "] has no \"params\"", src);
    out.push_back(std::move(saved));
  }
  return out;
}

}  // namespace

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict out;
  out.param_groups = json::Value::array();
  int64_t index = 0;
  for (const ParamGroup& group : groups_) {
    json::Value saved = json::Value::object();
    for (const auto& [key, value] : group.options) saved.add(key, json::Value::number(value));
    json::Value params = json::Value::array();
    for (const Tensor& p : group.params) {
      params.push_back(json::Value::integer(index));
      const std::string prefix = "state." + std::to_string(index) + ".";
      for (const auto& [name, tensor] : state(p)) out.tensors.emplace_back(prefix + name, tensor);
      if (const Tensor* master = find_master(p)) out.tensors.emplace_back(prefix + kMasterName, *master);
      ++index;
    }
    saved.add("params", std::move(params));
    out.param_groups.push_back(std::move(saved));
  }
  return out;
}

// ---- load_state_dict (Note [All-or-nothing loads]) ---------------------------------------

// What load_state_dict stages: the new options, masters and state, laid out as groups_'
// options, masters_ and state_, for the commit to swap in.
struct Optimizer::StagedLoad {
  std::vector<Options> options;                            // one per group
  std::unordered_map<const TensorImpl*, Tensor> masters;   // model parameter -> master
  std::unordered_map<const TensorImpl*, ParamState> state;
};

// The saved groups matched to ours in order: their checked options, and the map saved
// parameter index -> parameter.
std::vector<Options> Optimizer::stage_options(const OptimizerStateDict& state,
                                              std::map<int64_t, Tensor>& params_by_index) const {
  const std::string src = from(state);
  const std::string who = name_ + ".load_state_dict";
  const std::vector<SavedGroup> saved = parse_groups(state.param_groups, name_, src);
  KILN_CHECK(saved.size() == groups_.size(), who, ": the state dict has ", saved.size(),
             " parameter groups, this optimizer has ", groups_.size(), src);
  std::vector<Options> options;
  for (size_t g = 0; g < saved.size(); ++g) {
    KILN_CHECK(saved[g].params.size() == groups_[g].params.size(), who, ": parameter group ", g, " has ",
               saved[g].params.size(), " parameters in the state dict, ", groups_[g].params.size(),
               " in this optimizer", src);
    for (size_t k = 0; k < saved[g].params.size(); ++k)
      KILN_CHECK(params_by_index.emplace(saved[g].params[k], groups_[g].params[k]).second, who,
                 ": parameter index ", saved[g].params[k], " appears twice in param_groups", src);
    Options group_options = saved[g].options;
    check_option_names(group_options);
    for (const auto& [key, value] : defaults_) group_options.emplace(key, value);
    check_options(group_options);
    options.push_back(std::move(group_options));
  }
  return options;
}

// One tensor of the dict, checked against its parameter and copied to where it will live:
// the parameter's device, in the dtype of what it belongs with (float32 when the
// parameter keeps a master; a step counter is Float32 []).
struct Optimizer::StagedTensor {
  Tensor param;     // the model parameter it belongs to
  std::string key;  // "exp_avg", "step", "master_weight", ...
  Tensor value;
};

Optimizer::StagedTensor Optimizer::stage_tensor(const std::string& name, const Tensor& tensor,
                                                const std::map<int64_t, Tensor>& params_by_index,
                                                const std::string& who, const std::string& src) const {
  const auto parsed = parse_state_name(name);
  KILN_CHECK(parsed.has_value(), who, ": unexpected tensor \"", name, "\" (expected state.<index>.<name>)",
             src);
  const auto& [index, key] = *parsed;
  const auto it = params_by_index.find(index);
  KILN_CHECK(it != params_by_index.end(), who, ": tensor \"", name, "\" names parameter ", index,
             ", which no parameter group lists", src);
  const Tensor& p = it->second;
  KILN_CHECK(tensor.defined(), who, ": tensor \"", name, "\" is undefined", src);
  if (key == "step") {
    KILN_CHECK(tensor.numel() == 1, who, ": \"", name, "\" has shape ", tensor.sizes(),
               "; a step counter is one number", src);
    return {p, key, tensor.to(p.device(), DType::Float32, false, /*copy=*/true).reshape({})};
  }
  KILN_CHECK(tensor.sizes() == p.sizes(), who, ": \"", name, "\" has shape ", tensor.sizes(), ", parameter ",
             index, " has shape ", p.sizes(), src);
  const bool has_master = keeps_master(p);
  KILN_CHECK(key != kMasterName || has_master, who, ": \"", name, "\" is a master weight, but parameter ",
             index, " (", p.dtype(), ") keeps none in this optimizer (enable_master_weights() for float16/bfloat16 ",
             "parameters)", src);
  const DType dtype = has_master ? DType::Float32 : p.dtype();
  // A fresh copy laid out as the parameter (Note [Optimizer layouts] in optimizer.cpp).
  NoGradGuard no_grad;
  Tensor value = empty_like(p, {.dtype = dtype});
  value.copy_(tensor.detach());
  return {p, key, value};
}

Optimizer::StagedLoad Optimizer::stage_load(const OptimizerStateDict& state) const {
  const std::string who = name_ + ".load_state_dict", src = from(state);
  std::map<int64_t, Tensor> params_by_index;
  StagedLoad staged;
  staged.options = stage_options(state, params_by_index);
  std::vector<StagedTensor> tensors;
  for (const auto& [name, tensor] : state.tensors)
    tensors.push_back(stage_tensor(name, tensor, params_by_index, who, src));
  for (const StagedTensor& t : tensors)
    if (t.key == kMasterName) staged.masters[t.param.impl()] = t.value;
  // A parameter's state lives under its master (Note [Master weights]). Masters the dict
  // does not hold are made from the model's current weights, as at a first step; the ones
  // from before the load would write stale values back.
  for (StagedTensor& t : tensors) {
    if (t.key == kMasterName) continue;
    const TensorImpl* owner = t.param.impl();
    if (keeps_master(t.param)) {
      auto it = staged.masters.find(owner);
      if (it == staged.masters.end()) it = staged.masters.emplace(owner, make_master(t.param)).first;
      owner = it->second.impl();
    }
    staged.state[owner][t.key] = std::move(t.value);
  }
  return staged;
}

void Optimizer::load_state_dict(const OptimizerStateDict& state) {
  StagedLoad staged = stage_load(state);
  // Commit: swaps, which cannot fail. The parameters themselves are not touched.
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options.swap(staged.options[g]);
  masters_.swap(staged.masters);
  state_.swap(staged.state);
  grads_prepared_ = false;
}

SaveStatus save_state_dict(const OptimizerStateDict& state, const std::string& path) {
  return safetensors::save(state.tensors, path, {{kMetadataKey, json::dump(state.param_groups)}});
}

OptimizerStateDict load_state_dict_file(const std::string& path, Device device) {
  safetensors::Loaded loaded = safetensors::load(path, device);  // names the file in its errors
  const auto it = loaded.metadata.find(kMetadataKey);
  KILN_CHECK(it != loaded.metadata.end(), "load_state_dict_file: ", path, " has no \"", kMetadataKey,
             "\" metadata; it is not an optimizer state dict (a model's weights?)");
  OptimizerStateDict out;
  try {
    out.param_groups = json::parse(it->second);
  } catch (const Error& e) {
    KILN_CHECK(false, "load_state_dict_file: ", path, ": the \"", kMetadataKey, "\" metadata is not valid JSON: ", e.what());
  }
  out.source = path;
  parse_groups(out.param_groups, "load_state_dict_file", " (from " + path + ")");  // the structure, now
  out.tensors = std::move(loaded.tensors);
  return out;
}

}  // namespace kiln::optim
