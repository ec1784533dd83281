// resolve_run (train/run_context.h): each part of the context from the configuration, once.
#include "train/run_context.h"

#include <filesystem>

#include "core/backend.h"
#include "core/error.h"
#include "train/scans.h"

namespace kiln::train {

Device resolve_device(const std::string& name) {
  if (name == "auto") return cuda_is_available() ? Device::cuda() : Device::cpu();
  const Device device = Device::parse(name);
  if (device.is_cuda()) {
    KILN_CHECK(cuda_is_available(), "device ", name, ": CUDA is not available: ", cuda_unavailable_reason());
    KILN_CHECK(device.index < cuda_device_count(), "device ", name, ": there are ", cuda_device_count(),
               " GPUs");
  }
  return device;
}

std::string run_folder(const TrainConfig& config) {
  if (!config.out.empty()) return config.out;
  std::filesystem::path dataset(config.dataset);
  while (dataset.has_filename() && dataset.has_extension()) dataset = dataset.stem();  // scans.nii.gz -> scans
  const std::string name = dataset.has_filename() ? dataset.filename().string()
                                                  : dataset.parent_path().filename().string();  // "scans/"
  return "runs/" + name + "-" + config.model;
}

RunContext resolve_run(TrainConfig config) {
  const Choices choices = validate(config);
  // One's own scans by their absolute path, so that the run's configuration (and its
  // weights', which eval and predict read) finds them from any folder.
  if (is_own_scans(config)) config.dataset = std::filesystem::absolute(config.dataset).lexically_normal().string();
  DistributedRun distributed = join_distributed(config, choices.dist_backend);
  const Device device = run_device(config, distributed);
  const AmpProperties amp = amp_properties(choices.amp, to_dtype(choices.amp_dtype, device));
  RunFolder folder(run_folder(config));
  return {.config = std::move(config),
          .choices = choices,
          .distributed = std::move(distributed),
          .device = device,
          .amp = amp,
          .folder = std::move(folder)};
}

}  // namespace kiln::train
