// `kiln data download <flag> [--size 28|64] [--root DIR] [--url URL]`: fetches a MedMNIST
// 3D file where MedMnist3d looks for it (Note [MedMNIST files]), from Zenodo or a mirror,
// through data::download (Note [Downloads]: a .part file, resumed when a transfer was
// cut, checked against the official MD5, renamed into place), with a progress bar on
// standard error.
// `kiln data export <flag> --out DIR [--size 28|64] [--root DIR]`: the dataset as NIfTI
// files and a manifest (data/medmnist_export.h), for `kiln train --dataset DIR/manifest.csv`.
#include <iostream>

#include "core/error.h"
#include "core/human_bytes.h"
#include "data/download.h"
#include "data/medmnist.h"
#include "data/medmnist_export.h"
#include "tools/cli.h"

namespace kiln::tools {

std::string format_progress(int64_t done, int64_t total) {
  constexpr int kWidth = 30;
  std::string line = "\r[";
  if (total > 0) {
    const int filled = static_cast<int>(std::min<int64_t>(kWidth, done * kWidth / total));
    line += std::string(static_cast<size_t>(filled), '#') +
            std::string(static_cast<size_t>(kWidth - filled), ' ');
    line += "] " + std::to_string(std::min<int64_t>(100, done * 100 / total)) + "% " + human_bytes(done) +
            " of " + human_bytes(total);
  } else {
    line += std::string(kWidth, '?') + "] " + human_bytes(done);
  }
  return line;
}

int run_data(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    out << "usage: kiln data download FLAG [--size 28|64] [--root DIR] [--url URL]\n"
           "  FLAG: organmnist3d, nodulemnist3d, adrenalmnist3d, fracturemnist3d, vesselmnist3d, "
           "synapsemnist3d\n"
           "  --root: where to keep it (default $MEDMNIST_ROOT, else ~/.medmnist); --url: a mirror\n"
           "usage: kiln data export FLAG --out DIR [--size 28|64] [--root DIR] [--overwrite]\n"
           "  writes DIR/manifest.csv (image,label,split) and a NIfTI file per sample, for\n"
           "  kiln train --dataset DIR/manifest.csv\n";
    return 0;
  }
  if (args.empty() || (args[0] != "download" && args[0] != "export"))
    throw UsageError("the data commands are 'download' and 'export'");
  if (args.size() < 2) throw UsageError(args[0] + " needs a dataset FLAG");
  const std::string flag = args[1];
  data::MedMnistOptions options;
  std::string url, folder;
  bool overwrite = false;
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& option = args[i];
    if (option == "--overwrite" && args[0] == "export") {  // the one option without a value
      overwrite = true;
      continue;
    }
    if (i + 1 == args.size()) throw UsageError(option + " needs a value");
    const std::string& value = args[++i];
    if (option == "--size") {
      if (value != "28" && value != "64") throw UsageError("--size is 28 or 64, got '" + value + "'");
      options.size = value == "28" ? 28 : 64;
    } else if (option == "--root") {
      options.root = value;
    } else if (option == "--url" && args[0] == "download") {
      url = value;
    } else if (option == "--out" && args[0] == "export") {
      folder = value;
    } else {
      throw UsageError("unknown option '" + option + "'");
    }
  }
  if (args[0] == "export") {
    if (folder.empty()) throw UsageError("export needs --out DIR");
    const data::ExportResult result = data::export_medmnist(flag, options, folder, overwrite);
    out << result.manifest << ": " << result.files << " scans as NIfTI files; train on them with\n  kiln train --dataset "
        << result.manifest << "\n";
    return 0;
  }
  if (url.empty()) url = data::medmnist_url(flag, options.size);
  const std::string path = data::medmnist_path(flag, options);
  bool drew = false;  // the bar is on screen: end its line before anything else is printed
  const auto draw = [&drew](int64_t done, int64_t total) {
    if (done == 0 && total <= 0) return;  // nothing known yet (still connecting)
    std::cerr << format_progress(done, total) << std::flush;
    drew = true;
  };
  data::DownloadResult result;
  try {
    // (an unknown flag is an error listing the flags)
    data::DownloadOptions download = data::medmnist_download_options(flag, options.size);
    download.progress = draw;
    result = data::download(url, path, download);
  } catch (const Error&) {
    if (drew) std::cerr << "\n";
    throw;
  }
  if (drew) std::cerr << "\n";
  out << path << ": " << (result.already_present ? "already there, MD5 checked" : "downloaded, MD5 checked")
      << " (" << human_bytes(result.file_bytes) << (result.resumed ? ", resumed" : "") << ")\n";
  return 0;
}

}  // namespace kiln::tools
