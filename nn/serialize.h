// Weights files: a module's state_dict as a safetensors file (core/safetensors.h), the
// format PyTorch users save with safetensors.torch.save_file(model.state_dict(), path),
// so the dotted names match in both directions.
#pragma once

#include <string>

#include "core/safetensors.h"
#include "nn/module.h"

namespace kiln::nn {

// Argument order (the module, then the path): Note [Save and load argument order] in
// core/safetensors.h.

// Writes module.state_dict() to `path` atomically; returns whether the save is durable
// (see safetensors::save).
SaveStatus save_weights(const Module& module, const std::string& path, const safetensors::Metadata& metadata = {});
// Reads `path` and load_state_dict's it into `module` (values are converted to each
// tensor's dtype and device); strict as load_state_dict.
LoadStateDictResult load_weights(Module& module, const std::string& path, bool strict = true);

}  // namespace kiln::nn
