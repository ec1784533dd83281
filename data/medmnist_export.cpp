// export_medmnist (data/medmnist_export.h): each sample through nifti::write, the manifest
// through save_atomically.
#include "data/medmnist_export.h"

#include <cstdio>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/csv.h"
#include "data/nifti.h"

namespace kiln::data {

ExportResult export_medmnist(std::string_view flag, const MedMnistOptions& options, const std::string& out,
                             bool overwrite) {
  ExportResult result{.manifest = (std::filesystem::path(out) / "manifest.csv").string()};
  std::error_code exists_error;
  KILN_CHECK(overwrite || !std::filesystem::exists(result.manifest, exists_error), "export: ", result.manifest,
             " already exists; choose another folder, or replace it with --overwrite");
  std::string manifest = "image,label,split\n";
  for (const Split split : {Split::Train, Split::Val, Split::Test}) {
    const MedMnist3d dataset(flag, split, options);
    const std::string name(split_name(split));
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(out) / name, error);
    KILN_CHECK(!error, "export: cannot create ", out, "/", name, ": ", error.message());
    for (int64_t i = 0; i < dataset.size(); ++i) {
      char file[32];
      std::snprintf(file, sizeof file, "%06lld.nii.gz", static_cast<long long>(i));
      const std::string relative = name + "/" + file;
      nifti::write((std::filesystem::path(out) / relative).string(), dataset.images().select(0, i),
                   {.description = std::string(flag) + " " + name + " " + std::to_string(i)});
      manifest += csv_field(relative) + "," + std::to_string(dataset.labels().select(0, i).item<int64_t>()) + "," + name + "\n";
      ++result.files;
    }
  }
  save_atomically(manifest, result.manifest, "export");
  return result;
}

}  // namespace kiln::data
