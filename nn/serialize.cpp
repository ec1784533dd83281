// save_weights / load_weights: state_dict <-> safetensors file.
#include "nn/serialize.h"

namespace kiln::nn {

SaveStatus save_weights(const Module& module, const std::string& path, const safetensors::Metadata& metadata) {
  return safetensors::save(module.state_dict(), path, metadata);
}

LoadStateDictResult load_weights(Module& module, const std::string& path, bool strict) {
  const safetensors::Loaded loaded = safetensors::load(path);
  return module.load_state_dict(loaded.tensors, strict);
}

}  // namespace kiln::nn
