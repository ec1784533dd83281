// `kiln launch [options] [--] PROGRAM ARGS...`: torchrun for Kiln programs. Parses the
// options into dist::LaunchOptions (dist/launcher.h) and runs the ranks of this machine
// with signal forwarding; the exit status is the first failing rank's (0 when all
// succeed). Each option is "--name VALUE" or "--name=VALUE"; `--nproc-per-node gpu`
// starts one rank per visible GPU.
#include <charconv>
#include <iostream>

#include "core/backend.h"
#include "dist/launcher.h"
#include "tools/cli.h"

namespace kiln::tools {
namespace {

int64_t integer_option(const std::string& name, const std::string& value, int64_t low, int64_t high) {
  int64_t parsed = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (ec != std::errc() || end != value.data() + value.size() || parsed < low || parsed > high)
    throw UsageError(name + " takes an integer in " + std::to_string(low) + ".." + std::to_string(high) +
                     ", got '" + value + "'");
  return parsed;
}

int64_t processes_per_node(const std::string& value) {
  if (value != "gpu") return integer_option("--nproc-per-node", value, 1, 4096);
  const int gpus = cuda_device_count();
  if (gpus < 1) throw UsageError("--nproc-per-node gpu: this machine has no GPU Kiln can use");
  return gpus;
}

}  // namespace

int run_launch(const std::vector<std::string>& args, std::ostream& out) {
  dist::LaunchOptions options;
  options.forward_signals = true;
  options.on_line = [&out](const std::string& line) { out << line << std::endl; };
  size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string name = args[i];
    if (name == "--") {
      ++i;
      break;
    }
    if (name.rfind("--", 0) != 0) break;  // the program
    std::string value;
    if (const size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
    } else {
      if (i + 1 == args.size()) throw UsageError(name + " needs a value");
      value = args[++i];
    }
    if (name == "--nproc-per-node" || name == "--nproc_per_node") {
      options.nproc_per_node = processes_per_node(value);
    } else if (name == "--nnodes") {
      options.nnodes = integer_option(name, value, 1, 1 << 20);
    } else if (name == "--node-rank" || name == "--node_rank") {
      options.node_rank = integer_option(name, value, 0, 1 << 20);
    } else if (name == "--master-addr" || name == "--master_addr") {
      options.master_addr = value;
    } else if (name == "--master-port" || name == "--master_port") {
      options.master_port = static_cast<uint16_t>(integer_option(name, value, 1, 65535));
    } else {
      throw UsageError("unknown option '" + name + "'");
    }
  }
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (options.command.empty()) throw UsageError("no program to run");
  if (options.node_rank >= options.nnodes)
    throw UsageError("--node-rank " + std::to_string(options.node_rank) + " is outside 0.." +
                     std::to_string(options.nnodes - 1));
  const dist::LaunchResult result = dist::launch(options);
  if (result.exit_code != 0)
    std::cerr << "kiln launch: " << result.failure
              << (result.failed_rank >= 0 ? "; the other ranks were stopped\n" : "\n");
  return result.exit_code;
}

}  // namespace kiln::tools
