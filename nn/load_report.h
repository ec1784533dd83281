// Loading weights that come from elsewhere (a PyTorch checkpoint, another model's file)
// into a Module: the keys mapped first, then a non-strict load, and a report of what was
// and was not loaded.
//
// The mapping, in this order for each key:
//   1. strip_prefixes: the first listed prefix the key starts with is removed
//      ("module." by default: DataParallel and DistributedDataParallel save their model's
//      keys under it, as MedicalNet's checkpoints do);
//   2. drop: keys matching a pattern are left out: a pattern is a key, or a prefix ending
//      in '*' ("conv_seg.*": the guides' "replace conv_seg by a classifier" recipe);
//   3. rename: the first (from, to) whose `from` prefix the key starts with replaces it.
// Two keys that map to the same name are an error naming both.
//
//   auto report = nn::load_state_dict_mapped(*model, pth::state_dict(pth::load(path)),
//                                            {.drop = {"conv_seg.*"}});
//   std::cout << report.to_string();
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace kiln::nn {

struct KeyMapping {
  std::vector<std::string> strip_prefixes = {"module."};
  std::vector<std::string> drop = {};
  std::vector<std::pair<std::string, std::string>> rename = {};
};

struct LoadReport {
  std::string module_type;           // "ResNet3d"
  size_t given = 0;                  // keys in the state dict handed in
  size_t stripped = 0;               // keys a prefix was stripped from
  std::vector<std::string> dropped;  // by the mapping (their original names)
  size_t loaded = 0;
  LoadStateDictResult result;  // missing / unexpected / shape-mismatched, after mapping
  // Several lines: counts, then each list that is not empty (up to 20 names each).
  std::string to_string() const;
};

// `state` with its keys mapped; the keys left out go to `dropped` when given.
StateDict map_keys(const StateDict& state, const KeyMapping& mapping,
                   std::vector<std::string>* dropped = nullptr, size_t* stripped = nullptr);

// Maps the keys, then loads every key whose name and shape match (Module::load_state_dict
// non-strict: all or nothing, converting dtype and device) and reports the rest.
LoadReport load_state_dict_mapped(Module& module, const StateDict& state, const KeyMapping& mapping = {});

}  // namespace kiln::nn
