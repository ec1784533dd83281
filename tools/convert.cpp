// `kiln convert IN.pth OUT.safetensors [--all]`: reads a PyTorch checkpoint with
// data::pth (the restricted unpickler: none of the file's code runs), takes its state dict
// (the tensors under "state_dict", "model", ... or the top level: pth::state_dict) or,
// with --all, every tensor by its path, and writes them atomically as a safetensors file.
// The checkpoint's other entries (epoch, arch, an optimizer's hyper-parameters) become the
// file's metadata, with the source file's name and format, so nothing it said is lost.
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "tools/cli.h"

namespace kiln::tools {

int run_convert(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    out << "usage: kiln convert IN.pth OUT.safetensors [--all]\n";
    return 0;
  }
  const bool all = args.size() == 3 && args[2] == "--all";
  if (args.size() != 2 && !all) throw UsageError("takes IN.pth OUT.safetensors and optionally --all");
  const std::string& in = args[0];
  const std::string& out_path = args[1];
  KILN_CHECK(out_path.ends_with(".safetensors"), "kiln convert: the output ", out_path,
             " should end in .safetensors (the only format it writes)");
  const data::pth::Checkpoint checkpoint = data::pth::load(in);
  std::string under;
  const safetensors::NamedTensors tensors =
      all ? checkpoint.tensors : data::pth::state_dict(checkpoint, &under);
  KILN_CHECK(!tensors.empty(), "kiln convert: ", in, " holds no tensors");
  safetensors::Metadata metadata{{"source", std::filesystem::path(in).filename().string()},
                                 {"source_format", "pth " + checkpoint.format}};
  if (!all && !under.empty()) metadata["state_dict_under"] = under;
  for (const auto& [key, value] : checkpoint.others) metadata["pth." + key] = value;
  const SaveStatus status = safetensors::save(tensors, out_path, metadata);
  int64_t bytes = 0;
  for (const auto& [name, t] : tensors) bytes += t.numel() * static_cast<int64_t>(itemsize(t.dtype()));
  out << "wrote " << tensors.size() << " tensors (" << human_bytes(static_cast<uint64_t>(bytes)) << ") to "
      << out_path;
  if (!all) out << (under.empty() ? " from the checkpoint's top level" : " from its '" + under + "' entry");
  out << "; " << checkpoint.others.size() << " other entries kept as metadata\n";
  if (!status.warning.empty()) out << "warning: " << status.warning << "\n";
  return 0;
}

}  // namespace kiln::tools
