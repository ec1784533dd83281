// The command line of the subcommands that take a run configuration (`kiln train`, `kiln
// eval`, `kiln predict`): every TrainConfig field as a flag of the same name (Note
// [Configuration fields] in train/config.h), parsed with CLI11, after a recipe and a JSON
// configuration file:
//
//   defaults  <  --recipe NAME  <  --config FILE.json  <  the flags given
//
// so `kiln train --config run.json --lr 0.01` is run.json with another learning rate.
// Booleans are --name (on) and --name=false (off). --help lists every flag with its value before the
// flags (the default, or the recipe's and the file's when they are given).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "train/config.h"

namespace kiln::tools {

// A subcommand's own option beside the configuration's (--weights, --split, --output).
struct ExtraOption {
  std::string name;  // "--weights"
  std::string help;
  std::string* value;
  bool required = false;
};

struct ConfigCommand {
  std::string name;         // "train"
  std::string description;  // the first line of --help
  std::vector<ExtraOption> extra = {};
};

// Parses `args` into `config` (holding the defaults to start from). Returns false when
// --help was asked for (the help is on `out`); wrong arguments are a tools::UsageError, a
// bad configuration file a kiln::Error naming it.
bool parse_config_command(const std::vector<std::string>& args, const ConfigCommand& command,
                          train::TrainConfig& config, std::ostream& out);

// The value of `--name VALUE` or `--name=VALUE` in args (the last one given), if any.
std::optional<std::string> find_flag_value(const std::vector<std::string>& args, const std::string& name);

// The resolved configuration for the log: one line per group, "name=value" for each field.
std::string format_config(const train::TrainConfig& config);

}  // namespace kiln::tools
