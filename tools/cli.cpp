// run_kiln: the subcommand table, help, and the mapping of failures to exit codes
// (Note [Exit codes] in tools/cli.h).
#include "tools/cli.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace kiln::tools {
namespace {

struct Subcommand {
  const char* name;
  const char* arguments;
  const char* summary;
  int (*run)(const std::vector<std::string>& args, std::ostream& out);
};

const Subcommand kSubcommands[] = {
    {"train", "[--recipe medmnist] [--config FILE.json] [FLAGS]",
     "train a 3D classifier or regressor (MedMNIST 3D, synthetic, or your own scans from a CSV manifest or a "
     "folder; ResNet, DenseNet): logs, checkpoints, exact resume, the bottleneck report; kiln train --help lists "
     "every flag",
     run_train},
    {"eval", "--weights FILE [--split test] [FLAGS]",
     "ACC, AUC and the confusion matrix (or MAE, RMSE, R2) of trained weights on a split",
     run_eval},
    {"predict", "RUN --input FILE|FOLDER|CSV --out FILE.csv  |  --weights FILE --output FILE.csv|.npy [--split test]",
     "predictions for new scans, or per-sample scores of trained weights on a split", run_predict},
    {"reproduce", "RECIPE --datasets NAMES [--seeds N] [FLAGS]",
     "a recipe over datasets and seeds (medmnist: the MedMNIST v2 benchmark's 3D training), test ACC and AUC as "
     "mean ± sd in the benchmark's table layout",
     run_reproduce},
    {"plot", "RUN_DIR [--output FILE.svg]", "a run's loss, metric and learning-rate curves drawn to an SVG file",
     run_plot},
    {"info", "", "Kiln's version and build, its libraries' versions, and the GPUs it sees", run_info},
    {"inspect", "FILE",
     "what a file holds: a safetensors file's tensors and metadata, an .npy/.npz file's arrays, a .nii/.nii.gz scan's "
     "geometry, a PyTorch checkpoint's (.pth/.pt/.ckpt) tensors and other entries",
     run_inspect},
    {"convert", "IN.pth OUT.safetensors [--all]",
     "a PyTorch checkpoint's weights as a safetensors file, read without Python and without running its code",
     run_convert},
    {"data", "download FLAG [--size 28|64] [--root DIR] [--url URL]",
     "fetch a MedMNIST 3D dataset where Kiln looks for it (resumable, MD5-checked)", run_data},
    {"launch", "--nproc-per-node N|gpu [--nnodes M --node-rank R --master-addr A --master-port P] [--] PROGRAM ARGS",
     "start a distributed job's ranks on this machine, as torchrun (output prefixed by rank; one failing rank stops "
     "all)",
     run_launch},
};

void print_help(std::ostream& out) {
  out << "usage: kiln <command> [arguments]\n\ncommands:\n";
  for (const Subcommand& command : kSubcommands) {
    std::string head = std::string(command.name) + " " + command.arguments;
    if (head.size() >= 15) {  // a long usage gets a line of its own
      out << "  " << head << "\n" << std::string(17, ' ') << command.summary << "\n";
      continue;
    }
    head.resize(15, ' ');
    out << "  " << head << command.summary << "\n";
  }
  out << "  help           this message (also kiln --help)\n\n"
         "exit status: 0 on success, 1 on an error (bad input, unknown command),\n"
         "2 on wrong arguments to a command\n";
}

// Errors print on one line.
std::string one_line(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  return message;
}

}  // namespace

int run_kiln(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    print_help(err);
    return 2;
  }
  const std::string& name = args[0];
  if (name == "help" || name == "--help" || name == "-h") {
    print_help(out);
    return 0;
  }
  for (const Subcommand& command : kSubcommands) {
    if (name != command.name) continue;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    try {
      return command.run(rest, out);
    } catch (const UsageError& e) {
      err << "kiln " << name << ": " << one_line(e.what()) << "\nusage: kiln " << name << " "
          << command.arguments << "\n";
      return 2;
    } catch (const std::exception& e) {
      err << "kiln: " << one_line(e.what()) << "\n";
      return 1;
    }
  }
  err << "kiln: unknown command '" << one_line(name) << "' (try kiln --help)\n";
  return 1;
}

}  // namespace kiln::tools
