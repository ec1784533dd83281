// What `kiln eval` and the split form of `kiln predict` share: a run's weights scored on a
// split of its data (eval_command.cpp).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tools/config_options.h"
#include "train/data_setup.h"
#include "train/evaluate.h"

namespace kiln::tools {

struct SplitScores {
  train::TrainData data;
  train::SplitEvaluation evaluation;
};

// The command line of a command over weights (--weights, --split, then every
// configuration flag) over the weights' own configuration; false after --help.
bool parse_weights_command(const std::vector<std::string>& args, ConfigCommand command, std::string& weights,
                           std::string& split, train::TrainConfig& config, std::ostream& out);

// The weights' model on `split` of the configuration's data.
SplitScores score_split(const std::string& weights, const std::string& split, const train::TrainConfig& config);

}  // namespace kiln::tools
