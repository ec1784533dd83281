// Training on your own scans from C++, in a page: a manifest of NIfTI files (image, label)
// in, a trained classifier and its test metrics out, then a prediction for one new scan.
// `kiln train --dataset manifest.csv` is the same from the command line.
//
//   ./train_own_scans                  generates a small set of scans in a temporary folder
//   ./train_own_scans manifest.csv     your own: a CSV with image and label columns
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <kiln/kiln.h>

namespace {

// A stand-in for a hospital's export: noisy balls, cubes and jacks at 16^3 as NIfTI files,
// 1.5 mm voxels, and the manifest listing them.
std::string write_example_scans(const std::filesystem::path& folder) {
  const kiln::data::SyntheticShapes shapes({.size = 90, .side = 16, .seed = 11});
  const char* names[] = {"ball", "cube", "jack"};
  std::ofstream manifest(folder / "manifest.csv");
  manifest << "image,label\n";
  for (int64_t i = 0; i < shapes.size(); ++i) {
    const kiln::data::Sample sample = shapes.get(i);
    const std::string file = "scan" + std::to_string(i) + ".nii.gz";
    kiln::data::nifti::write((folder / file).string(), sample.at("image"),
                             {.affine = {{{1.5, 0, 0, 0}, {0, 1.5, 0, 0}, {0, 0, 1.5, 0}, {0, 0, 0, 1}}}});
    manifest << file << "," << names[sample.at("label").item<int64_t>()] << "\n";
  }
  return (folder / "manifest.csv").string();
}

}  // namespace

int main(int argc, char** argv) {
  kiln::init();
  const std::filesystem::path work = std::filesystem::temp_directory_path() / "kiln_own_scans";
  std::filesystem::create_directories(work);
  kiln::train::TrainConfig config;
  config.dataset = argc > 1 ? argv[1] : write_example_scans(work);
  config.spacing = "2";           // resampled to 2 mm voxels from each file's header
  config.normalize = "zscore";    // each scan to mean 0, standard deviation 1
  config.crop_pad = "12,12,12";   // then to one size
  config.model = "resnet10";
  config.width = 0.25;
  config.epochs = 5;
  config.batch_size = 8;
  config.out = (work / "run").string();
  config.overwrite = true;

  kiln::train::RunContext run = kiln::train::resolve_run(config);  // checked once, here
  const kiln::train::TrainData data = kiln::train::make_train_data(config, run.choices);  // every header checked
  std::printf("%s: %lld train, %lld val, %lld test\n", data.description.c_str(),
              static_cast<long long>(data.train->size()), static_cast<long long>(data.val->size()),
              static_cast<long long>(data.test->size()));
  kiln::train::Trainer trainer(std::move(run), data, kiln::train::make_model(config, data).model);
  const kiln::train::RunSummary summary = trainer.fit();
  std::printf("%s", kiln::train::format_summary(summary).c_str());

  // A new scan, preprocessed exactly as the training scans were (the run recorded how).
  kiln::data::Sample scan = data.test->get(0);
  kiln::Generator unused;
  data.eval_transform->apply(scan, unused);
  kiln::NoGradGuard no_grad;
  trainer.model().eval();
  const kiln::Tensor probabilities =
      kiln::softmax(trainer.model().forward(scan.at("image").unsqueeze(0).to(trainer.device())), 1);
  std::printf("P(%s) = %.3f for %s\n", data.class_names[0].c_str(), probabilities.select(1, 0).item<double>(),
              scan.metadata.at("path").c_str());
  return 0;
}
