// The `kiln` command as library functions, so tests can run it without a process.
//
// run_kiln(args) dispatches args[0] to a subcommand (one file each: info.cpp,
// inspect.cpp) and turns failures into exit codes (Note [Exit codes]); main.cpp only
// forwards argv. Each subcommand also exposes its formatting as a pure function.
//
// Note [Exit codes]: 0 on success; 1 on an error, with one line "kiln: <message>" on
// stderr (bad input file, unknown subcommand); 2 on wrong arguments to a subcommand,
// with its usage line.
#pragma once

#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/human_bytes.h"  // human_bytes, for the tables
#include "core/safetensors.h"
#include "data/npy.h"
#include "data/nifti.h"
#include "data/npz.h"
#include "data/pth.h"
#include "kiln/build_info.h"

namespace kiln::tools {

// Runs `kiln args...` (args excludes the program name), writing to out and err.
int run_kiln(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Thrown by a subcommand for wrong arguments: exit code 2 with the usage line.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `kiln info`: versions and devices (kiln/build_info.h).
int run_info(const std::vector<std::string>& args, std::ostream& out);
std::string format_info(const BuildInfo& build, const CudaInfo& cuda);

// `kiln inspect FILE`: a safetensors file's tensors (sorted by name) and metadata.
int run_inspect(const std::vector<std::string>& args, std::ostream& out);
std::string format_inspect(const std::string& path, const safetensors::Header& header);
std::string format_inspect(const std::string& path, const data::npy::Header& header);
std::string format_inspect(const std::string& path, const std::vector<data::npz::Array>& arrays);
std::string format_inspect(const std::string& path, const data::nifti::Header& header);
std::string format_inspect(const std::string& path, const data::pth::Checkpoint& checkpoint);

// `kiln convert IN.pth OUT.safetensors [--all]`: a PyTorch checkpoint's state dict (or,
// with --all, every tensor in it) as a safetensors file, the checkpoint's other entries
// (epoch, arch, ...) as its metadata; the line saying what was written.
int run_convert(const std::vector<std::string>& args, std::ostream& out);

// `kiln data download FLAG [--size 28|64] [--root DIR] [--url URL]`: a MedMNIST 3D file,
// fetched to where MedMnist3d looks for it, MD5-checked; the progress bar's line.
int run_data(const std::vector<std::string>& args, std::ostream& out);

// `kiln launch --nproc-per-node N|gpu [--nnodes M --node-rank R --master-addr A
// --master-port P] [--] PROGRAM ARGS...`: the ranks of this machine (dist/launcher.h),
// their output prefixed with "[rank N] "; the first failing rank's exit status.
int run_launch(const std::vector<std::string>& args, std::ostream& out);
std::string format_progress(int64_t done, int64_t total);

// `kiln train [--recipe NAME] [--config FILE] [FLAGS]`: a training run (tools/
// config_options.h lists how flags, files and recipes combine).
int run_train(const std::vector<std::string>& args, std::ostream& out);
// `kiln eval --weights W [--split S] [FLAGS]`: trained weights on a split (tools/
// eval_command.cpp). `kiln predict RUN --input FILE|FOLDER|CSV --out F.csv`: new scans
// predicted; `kiln predict --weights W --output F [--split S]`: a split's scores
// (tools/predict_command.cpp).
int run_eval(const std::vector<std::string>& args, std::ostream& out);
int run_predict(const std::vector<std::string>& args, std::ostream& out);
// `kiln plot RUN_DIR [--output FILE.svg]`: a run's curves as an SVG picture (train/plot.h).
int run_plot(const std::vector<std::string>& args, std::ostream& out);
// `kiln reproduce RECIPE --datasets NAMES [--seeds N] [FLAGS]`: a recipe over datasets and
// seeds, the test metrics as mean ± sd in MedMNIST's table layout (reproduce_command.cpp).
int run_reproduce(const std::vector<std::string>& args, std::ostream& out);
// "0.863±0.012": the mean and the sample standard deviation (the mean alone for one value).
std::string mean_and_sd(const std::vector<double>& values);
// The table: `metrics[d][seed]` = {best ACC, best AUC, final ACC, final AUC} of dataset d.
std::string format_reproduce_table(const std::string& method, const std::vector<std::string>& datasets,
                                   const std::vector<std::vector<std::vector<double>>>& metrics);


}  // namespace kiln::tools
