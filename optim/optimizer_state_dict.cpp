// The optimizer's state dict, in PyTorch's layout: parameters numbered 0, 1, ... across
// the groups in order; tensors "state.<index>.<name>" (with master weights also
// "state.<index>.master_weight"); the groups' options and parameter indices as JSON.
//
// Loading follows PyTorch: the saved groups are matched to this optimizer's groups in
// order, and the saved parameter indices to its parameters in order. Everything is
// checked first (group and parameter counts, option names and values, every tensor's
// name and shape) and nothing is loaded if any check fails. Loaded tensors are copies,
// in the dtype and on the device of the tensor they belong to (a step counter: Float32
// on the parameter's device), so a state dict can move between devices.
#include <charconv>
#include <string_view>

#include "core/error.h"
#include "optim/optimizer.h"

namespace kiln::optim {
namespace {

constexpr const char* kMetadataKey = "kiln.optimizer";
constexpr const char* kMasterName = "master_weight";

// " (from <file>)" for the messages of a state dict read from a file.
std::string from(const OptimizerStateDict& state) {
  return state.source.empty() ? std::string() : " (from " + state.source + ")";
}

bool is_low_precision(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

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

void Optimizer::load_state_dict(const OptimizerStateDict& state) {
  const std::string src = from(state);
  const std::string who = name_ + ".load_state_dict";
  // Groups: counts, options, and the map saved index -> parameter.
  std::vector<SavedGroup> saved = parse_groups(state.param_groups, name_, src);
  KILN_CHECK(saved.size() == groups_.size(), who, ": the state dict has ", saved.size(),
             " parameter groups, this optimizer has ", groups_.size(), src);
  std::map<int64_t, Tensor> params_by_index;
  std::vector<Options> new_options;
  for (size_t g = 0; g < saved.size(); ++g) {
    KILN_CHECK(saved[g].params.size() == groups_[g].params.size(), who, ": parameter group ", g, " has ",
               saved[g].params.size(), " parameters in the state dict, ", groups_[g].params.size(),
               " in this optimizer", src);
    for (size_t k = 0; k < saved[g].params.size(); ++k)
      KILN_CHECK(params_by_index.emplace(saved[g].params[k], groups_[g].params[k]).second, who,
                 ": parameter index ", saved[g].params[k], " appears twice in param_groups", src);
    Options options = saved[g].options;
    check_option_names(options);
    for (const auto& [key, value] : defaults_) options.emplace(key, value);
    check_options(options);
    new_options.push_back(std::move(options));
  }

  // Tensors: each names a known parameter, has its shape, and becomes a copy in place.
  std::map<const TensorImpl*, Tensor> loaded_masters;  // model parameter -> master
  std::vector<std::tuple<Tensor, std::string, Tensor>> loaded_state;  // parameter, name, tensor
  for (const auto& [name, tensor] : state.tensors) {
    const auto parsed = parse_state_name(name);
    KILN_CHECK(parsed.has_value(), who, ": unexpected tensor \"", name, "\" (expected state.<index>.<name>)", src);
    const auto& [index, key] = *parsed;
    const auto it = params_by_index.find(index);
    KILN_CHECK(it != params_by_index.end(), who, ": tensor \"", name, "\" names parameter ", index,
               ", which no parameter group lists", src);
    const Tensor& p = it->second;
    KILN_CHECK(tensor.defined(), who, ": tensor \"", name, "\" is undefined", src);
    if (key == "step") {
      KILN_CHECK(tensor.numel() == 1, who, ": \"", name, "\" has shape ", tensor.sizes(), "; a step counter is one number", src);
      loaded_state.emplace_back(p, key, tensor.to(p.device(), DType::Float32, false, true).reshape({}));
      continue;
    }
    KILN_CHECK(tensor.sizes() == p.sizes(), who, ": \"", name, "\" has shape ", tensor.sizes(), ", parameter ", index,
               " has shape ", p.sizes(), src);
    const bool has_master = master_weights_ && is_low_precision(p.dtype());
    const DType dtype = has_master ? DType::Float32 : p.dtype();
    const Tensor copy = tensor.to(p.device(), dtype, false, /*copy=*/true).contiguous();
    if (key == kMasterName) {
      KILN_CHECK(has_master, who, ": \"", name, "\" is a master weight, but parameter ", index, " (", p.dtype(),
                 ") keeps none in this optimizer (enable_master_weights() for float16/bfloat16 parameters)", src);
      loaded_masters[p.impl()] = copy;
    } else {
      loaded_state.emplace_back(p, key, copy);
    }
  }

  // Everything checked: replace the options, the masters and the whole state.
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options = std::move(new_options[g]);
  // Masters the dict does not hold are made again from the model's current weights
  // (Note [Master weights]); the ones from before the load would write stale values back.
  masters_.clear();
  for (const auto& [param, master] : loaded_masters) masters_[param] = master;
  state_.clear();
  for (const auto& [p, key, tensor] : loaded_state) {
    const Tensor master = master_of(p);  // made from the parameter when the dict held none
    state_[master.defined() ? master.impl() : p.impl()][key] = tensor;
  }
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
