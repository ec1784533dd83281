// parse_config_command (tools/config_options.h): the recipe and --config file found first
// by a scan of the arguments, then one CLI11 parse binding every configuration field.
#include "tools/config_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/text_list.h"
#include "tools/cli.h"

namespace kiln::tools {
namespace {


void bind_field(CLI::App& app, const train::ConfigField& field, train::TrainConfig& config) {
  const std::string flag = std::string("--") + field.name;
  // A choice's names come from its table (train/choices.h), never from the help text.
  const std::string help = field.choices ? std::string(field.help) + " (" + field.choices() + ")" : field.help;
  CLI::Option* option = std::visit(
      [&](auto member) -> CLI::Option* {
        auto& value = config.*member;
        using T = std::remove_cvref_t<decltype(value)>;
        if constexpr (std::is_same_v<T, bool>) {
          return app.add_flag(flag, value, help + (value ? " (on; " + flag + "=false turns it off)" : " (off)"));
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          return app.add_option(flag, value, help)->delimiter(',');
        } else {  // given twice, the last one counts (as argparse)
          return app.add_option(flag, value, help)
              ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        }
      },
      field.member);
  if (!std::holds_alternative<bool train::TrainConfig::*>(field.member)) option->capture_default_str();
  option->group(field.group);
}

}  // namespace

std::optional<std::string> find_flag_value(const std::vector<std::string>& args, const std::string& name) {
  std::optional<std::string> value;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) value = args[i + 1];
    if (args[i].starts_with(name + "=")) value = args[i].substr(name.size() + 1);
  }
  return value;
}

bool parse_config_command(const std::vector<std::string>& args, const ConfigCommand& command,
                          train::TrainConfig& config, std::ostream& out) {
  const bool help = std::find_if(args.begin(), args.end(), [](const std::string& a) {
                      return a == "--help" || a == "-h";
                    }) != args.end();
  if (const std::optional<std::string> recipe = find_flag_value(args, "--recipe"))
    train::apply_recipe(*recipe, config);
  if (const std::optional<std::string> file = find_flag_value(args, "--config")) {
    train::update_from_json(config, json::parse_file(*file), *file);
  }
  CLI::App app(command.description, "kiln " + command.name);
  app.set_help_flag("-h,--help", "this help");
  std::string recipe, file;
  app.add_option("--recipe", recipe, "start from a published recipe's settings: " + joined(train::recipe_names()))
      ->group("configuration");
  app.add_option("--config", file, "a JSON file of settings (the keys are these flags' names)")
      ->group("configuration");
  for (const ExtraOption& extra : command.extra) {
    CLI::Option* option = app.add_option(extra.name, *extra.value, extra.help)->group(command.name);
    if (extra.required && !help) option->required();
  }
  for (const train::ConfigField& field : train::config_fields()) bind_field(app, field, config);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  return true;
}

std::string format_config(const train::TrainConfig& config) {
  std::vector<std::string> groups;
  std::map<std::string, std::string> lines;
  for (const train::ConfigField& field : train::config_fields()) {
    std::string& line = lines[field.group];
    if (line.empty()) groups.push_back(field.group);
    line += std::string(line.empty() ? "" : " ") + field.name + "=" + train::field_text(config, field);
  }
  std::string text;
  for (const std::string& group : groups) text += "  " + group + ": " + lines[group] + "\n";
  return text;
}

}  // namespace kiln::tools
