// Your own scans through `kiln train`, `kiln eval` and `kiln predict` (train/scans.h,
// train/preprocessing.h, tools/predict_command.cpp), on NIfTI files written here from the
// synthetic shapes and on nibabel's fixtures (tests/train/scans/make_fixtures.py):
// manifests and folders train, stratified splits are saved and followed on resume, every
// problem is reported before the first step and nothing is written, multi-label,
// regression and several channels train, predict preprocesses new scans as training did,
// scans in other orientations load as nibabel reads them; and AdrenalMNIST3D exported to
// NIfTI gives MedMNIST's own route's input tensors and test metrics, bit for bit.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "core/ops.h"
#include "core/text_file.h"
#include "data/csv.h"
#include "data/medmnist.h"
#include "data/medmnist_export.h"
#include "data/nifti.h"
#include "data/npy.h"
#include "data/npz.h"
#include "data/scan_dataset.h"
#include "data/synthetic.h"
#include "tests/test_util.h"
#include "tools/cli.h"
#include "train/data_setup.h"
#include "train/scans.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::TempFolder;

struct CliResult {
  int code;
  std::string out, err;
};

CliResult run_cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = -1;
  testing::with_watchdog(std::chrono::seconds(300), [&] { code = tools::run_kiln(args, out, err); });
  return {code, out.str(), err.str()};
}

// A tiny model's flags for a run on `dataset` into `out`.
std::vector<std::string> tiny(const std::string& dataset, const std::string& out) {
  return {"train",  "--dataset", dataset, "--model",   "resnet10", "--width", "0.0625", "--batch-size", "6",
          "--epochs", "1",       "--workers", "2",     "--device", "cpu",     "--out",  out};
}

// `per_class` synthetic volumes of each shape (ball, cube, jack) at 12^3 as NIfTI files,
// ImageFolder-style under root/<class>/, and the manifest root/scans.csv (image, label,
// and a regression target: the volume's mean).
struct Scans {
  TempFolder folder;
  std::string root = folder.file("scans");
  std::string manifest = root + "/scans.csv";
  std::vector<std::string> files;
  explicit Scans(int64_t per_class = 8) {
    const data::SyntheticShapes shapes({.size = 1000, .side = 12, .noise = 0.3, .seed = 4});
    const char* names[] = {"ball", "cube", "jack"};
    std::string csv = "image,label,mean\n";
    std::vector<int64_t> count(3, 0);
    for (int64_t i = 0; static_cast<int64_t>(files.size()) < 3 * per_class; ++i) {
      const data::Sample sample = shapes.get(i);
      const int64_t label = sample.at("label").item<int64_t>();
      if (count[static_cast<size_t>(label)]++ >= per_class) continue;
      const std::string relative = std::string(names[label]) + "/" + std::to_string(i) + ".nii.gz";
      fs::create_directories(root + "/" + names[label]);
      data::nifti::write(root + "/" + relative, sample.at("image"));
      files.push_back(relative);
      csv += relative + "," + names[label] + "," + std::to_string(sample.at("image").mean().item<double>()) + "\n";
    }
    std::ofstream(manifest) << csv;
  }
};

TEST(OwnScans, AFolderAndAManifestTrainWithAStratifiedSplitThatAResumeFollows) {
  const Scans scans;
  const CliResult folder = run_cli(tiny(scans.root, scans.folder.file("folder-run")));
  ASSERT_EQ(folder.code, 0) << folder.err;
  EXPECT_NE(folder.out.find("3 classes: ball, cube, jack; 1 channel"), std::string::npos) << folder.out;
  const data::CsvTable split = data::read_csv(scans.folder.file("folder-run/split.csv"));
  ASSERT_EQ(split.rows.size(), 24u);
  EXPECT_EQ(split.columns, (std::vector<std::string>{"image", "label", "split"}));
  std::map<std::string, std::set<std::string>> classes_in;  // each class in each split
  for (const auto& row : split.rows) classes_in[row[2]].insert(row[1]);
  for (const char* name : {"train", "val", "test"}) EXPECT_EQ(classes_in[name].size(), 3u) << name;

  std::vector<std::string> args = tiny(scans.manifest, scans.folder.file("run"));
  ASSERT_EQ(run_cli(args).code, 0);
  const std::string saved = read_text_file(scans.folder.file("run/split.csv"));
  // The manifest re-sorted, and a fraction changed, between the run and its resume: the
  // resumed run follows the split it saved.
  std::string csv = read_text_file(scans.manifest);
  std::vector<std::string> lines;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::reverse(lines.begin() + 1, lines.end());
  std::ofstream out(scans.manifest);
  for (const std::string& line : lines) out << line << "\n";
  out.close();
  args.insert(args.end(), {"--resume", "auto", "--epochs", "2"});
  const CliResult resumed = run_cli(args);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos);
  const auto rows = [](std::string text) {  // the rows follow the manifest's order
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(rows(read_text_file(scans.folder.file("run/split.csv"))), rows(saved));
  const json::Value summary = json::parse_file(scans.folder.file("run/summary.json"));
  EXPECT_EQ(summary.find("epochs")->as_integer(), 2);
  EXPECT_EQ(summary.find("classes")->as_array().size(), 3u);
  // A split.csv changed by hand is a problem to report, not a scan silently left out.
  std::string tampered = read_text_file(scans.folder.file("run/split.csv"));
  tampered.replace(tampered.find(",train"), 6, ",holdout");
  std::ofstream(scans.folder.file("run/split.csv")) << tampered;
  args.push_back("--check-data");
  EXPECT_NE(run_cli(args).out.find("has split 'holdout', not train, val or test"), std::string::npos);
}

// Note [Scan checks]: each problem named, all at once, before anything is written.
TEST(OwnScans, EveryProblemIsReportedBeforeTheFirstStepAndNothingIsWritten) {
  const Scans scans(3);
  std::ofstream(scans.root + "/corrupt.nii.gz") << "not a scan";
  data::nifti::write(scans.root + "/small.nii.gz", zeros({1, 10, 12, 12}));
  std::string csv = "image,label,split\n";
  const std::vector<std::string> split = {"train", "train", "val", "train", "train", "val", "train", "train", "val"};
  for (size_t i = 0; i < scans.files.size(); ++i) {
    const std::string name = scans.files[i].substr(0, scans.files[i].find('/'));
    csv += scans.files[i] + "," + name + "," + split[i] + "\n";
  }
  csv += "missing.nii.gz,ball,train\ncorrupt.nii.gz,cube,train\nsmall.nii.gz,jack,train\n" + scans.files[0] +
         ",sphere,train\n" + scans.files[1] + ",ball,holdout\n";
  const std::string manifest = scans.root + "/bad.csv";
  std::ofstream(manifest) << csv;
  std::vector<std::string> args = tiny(manifest, scans.folder.file("run"));
  args.insert(args.end(), {"--class-names", "ball,cube,jack", "--check-data"});
  const CliResult check = run_cli(args);
  EXPECT_EQ(check.code, 1) << check.err;
  for (const std::string& expected :
       {"bad.csv line 11: volume file '" + scans.root + "/missing.nii.gz': no such file",
        "bad.csv line 12: NIfTI file '" + scans.root + "/corrupt.nii.gz': is not a readable NIfTI",
        "bad.csv line 13: " + scans.root + "/small.nii.gz is [1, 10, 12, 12] but " + manifest + " line 2 is [1, 12, 12, 12]",
        std::string("bad.csv line 14: label 'sphere' is not one of the classes: ball, cube, jack"),
        std::string("bad.csv line 15: split 'holdout' is not train, val or test"),
        std::string("the test split is empty")}) {
    EXPECT_NE(check.out.find(expected), std::string::npos) << expected << "\n" << check.out;
  }
  EXPECT_FALSE(fs::exists(scans.folder.file("run")));
  args.pop_back();  // train without --check-data: the same problems stop it, one error
  const CliResult train = run_cli(args);
  EXPECT_EQ(train.code, 1);
  EXPECT_NE(train.err.find("problems, listed above; nothing was written"), std::string::npos) << train.err;
  EXPECT_EQ(std::count(train.err.begin(), train.err.end(), '\n'), 1);
  EXPECT_NE(train.out.find("line 14: label 'sphere'"), std::string::npos);  // one problem a line
  EXPECT_FALSE(fs::exists(scans.folder.file("run")));
  // A class absent from a split, and data flags that only one's own scans take.
  std::ofstream(manifest) << "image,label,split\n" << scans.files[0] << ",ball,train\n" << scans.files[3]
                          << ",cube,train\n" << scans.files[1] << ",ball,val\n" << scans.files[2] << ",ball,test\n";
  args.push_back("--check-data");
  EXPECT_NE(run_cli(args).out.find("class 'cube' has no scan in the val split"), std::string::npos);
  EXPECT_NE(run_cli({"train", "--dataset", manifest, "--class-names", "ball,ball", "--check-data"}).err.find(
                "a class is named twice"),
            std::string::npos);
  EXPECT_NE(run_cli({"train", "--dataset", "synthetic", "--resize", "8,8,8", "--check-data"}).err.find(
                "are for your own scans"),
            std::string::npos);
  EXPECT_NE(run_cli({"train", "--dataset", "adrenal", "--check-data"}).err.find(
                "neither a MedMNIST 3D flag (organmnist3d,"),
            std::string::npos);
}

// What a header does not show, or shows only across rows: a scan listed twice, labels with
// spaces around them (one class with and without), a target beyond float32, one scan's
// files at different voxel sizes, a pipe where a file should be, a NaN voxel (found when
// the loader reads it, naming the file), and a scan relabelled between a run and its resume.
TEST(OwnScans, RepeatsRelabellingNonFiniteVoxelsAndPipesAreCaught) {
  const Scans scans(3);
  const std::string manifest = scans.root + "/m.csv";
  std::ofstream(manifest) << "image,label,size\n" << scans.files[0] << ", ball ,1\n" << scans.files[1] << ",ball,1e39\n"
                          << scans.files[0] << ",ball,2\n";
  std::vector<std::string> args = tiny(manifest, scans.folder.file("run"));
  args.push_back("--check-data");
  const std::string listed = run_cli(args).out;
  EXPECT_NE(listed.find("m.csv line 4: " + scans.root + "/" + scans.files[0] + " is listed again (first at " + manifest +
                        " line 2)"),
            std::string::npos)
      << listed;
  EXPECT_NE(listed.find("1 class found"), std::string::npos) << listed;  // " ball " is ball
  args.insert(args.end() - 1, {"--task", "regression", "--label-columns", "size"});
  EXPECT_NE(run_cli(args).out.find("the target '1e39' does not fit float32"), std::string::npos);

  data::nifti::write(scans.root + "/fine.nii.gz", zeros({1, 12, 12, 12}),
                     {.affine = {{{2, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, 2, 0}, {0, 0, 0, 1}}}});
  ASSERT_EQ(::mkfifo((scans.root + "/pipe.nii.gz").c_str(), 0600), 0);
  std::ofstream(manifest) << "t1,t2,label\n" << scans.files[0] << ",fine.nii.gz,ball\n" << scans.files[1]
                          << ",pipe.nii.gz,cube\n";
  args = tiny(manifest, scans.folder.file("run"));
  args.insert(args.end(), {"--image-columns", "t1,t2", "--check-data"});
  const std::string grids = run_cli(args).out;  // under the test's watchdog: a pipe must not block
  EXPECT_NE(grids.find("fine.nii.gz has 2 x 2 x 2 mm voxels, the scan's first file 1 x 1 x 1"), std::string::npos)
      << grids;
  EXPECT_NE(grids.find("pipe.nii.gz': not a regular file"), std::string::npos) << grids;

  // (An .npy keeps a NaN as it is; nifti_clib reads a NIfTI's non-finite floats as 0.)
  std::vector<float> voxels(12 * 12 * 12, 0.5f);
  voxels[5] = std::nanf("");
  voxels[9] = -INFINITY;
  data::npy::save(tensor(voxels, {12, 12, 12}), scans.root + "/nan.npy");
  EXPECT_KILN_ERROR(data::load_scan({scans.root + "/nan.npy"}, {}), "nan.npy' has 2 voxels that are NaN or infinite");

  args = tiny(scans.manifest, scans.folder.file("relabel"));
  ASSERT_EQ(run_cli(args).code, 0);
  std::string csv = read_text_file(scans.manifest);
  csv.replace(csv.find(",ball,"), 6, ",cube,");
  std::ofstream(scans.manifest) << csv;
  args.insert(args.end(), {"--resume", "auto", "--epochs", "2", "--check-data"});
  EXPECT_NE(run_cli(args).out.find("was 'ball' when the run began, and is 'cube' now"), std::string::npos);
}

// kiln predict writes nowhere it was not asked to: not over its input, not over the run's
// own files, not over an existing file without --overwrite; kiln data export likewise.
TEST(OwnScans, PredictAndExportOverwriteNothingUnasked) {
  const Scans scans(3);
  ASSERT_EQ(run_cli(tiny(scans.manifest, scans.folder.file("run"))).code, 0);
  const std::string run = scans.folder.file("run");
  const auto predict = [&](const std::string& out, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"predict", run, "--input", scans.manifest, "--out", out};
    args.insert(args.end(), more.begin(), more.end());
    return run_cli(args);
  };
  EXPECT_NE(predict(scans.manifest).err.find("is the --input itself"), std::string::npos);
  EXPECT_NE(predict(run + "/split.csv").err.find("is the run's own split.csv"), std::string::npos);
  ASSERT_EQ(predict(scans.folder.file("p.csv")).code, 0);
  EXPECT_NE(predict(scans.folder.file("p.csv")).err.find("already exists; give --overwrite"), std::string::npos);
  EXPECT_EQ(predict(scans.folder.file("p.csv"), {"--overwrite"}).code, 0);
  data::nifti::write(scans.root + "/two.nii.gz", zeros({2, 12, 12, 12}));
  const CliResult channels = run_cli({"predict", run, "--input", scans.root + "/two.nii.gz", "--out",
                                      scans.folder.file("q.csv")});
  EXPECT_NE(channels.err.find("two.nii.gz has 2 channels; the model takes 1"), std::string::npos) << channels.err;

  TempFolder folder;
  const data::MedMnistInfo& info = data::medmnist_info("adrenalmnist3d");
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const auto& [split, count] : {std::pair{"train", info.train}, {"val", info.val}, {"test", info.test}}) {
    arrays.emplace_back(std::string(split) + "_images", zeros({count, 28, 28, 28}, {.dtype = DType::UInt8}));
    arrays.emplace_back(std::string(split) + "_labels", zeros({count, 1}, {.dtype = DType::UInt8}));
  }
  data::npz::save(arrays, folder.file("adrenalmnist3d.npz"));
  std::ofstream(folder.file("mine/manifest.csv")) << "precious";
  fs::create_directories(folder.file("mine"));
  std::ofstream(folder.file("mine/manifest.csv")) << "precious";
  EXPECT_KILN_ERROR(data::export_medmnist("adrenalmnist3d", {.root = folder.path().string(), .check_md5 = false},
                                          folder.file("mine")),
                    "manifest.csv already exists", "--overwrite");
  EXPECT_EQ(read_text_file(folder.file("mine/manifest.csv")), "precious");
}

// Two image columns are channels; a number column is a regression target, with MAE, RMSE
// and R2 as metrics (RMSE monitored); eval and predict report and write them.
TEST(OwnScans, ChannelsAndRegressionTrainAndPredict) {
  const Scans scans(6);
  std::string csv = "t1,t2,mean\n";
  const data::CsvTable table = data::read_csv(scans.manifest);
  for (const auto& row : table.rows) csv += row[0] + "," + row[0] + "," + row[2] + "\n";
  const std::string manifest = scans.root + "/two.csv";
  std::ofstream(manifest) << csv;
  std::vector<std::string> args = tiny(manifest, scans.folder.file("run"));
  args.insert(args.end(), {"--image-columns", "t1,t2", "--label-columns", "mean", "--task", "regression",
                           "--normalize", "minmax", "--lr", "0.01"});
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 regression targets: mean; 2 channels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test        epoch    MAE        RMSE       R2"), std::string::npos) << r.out;
  EXPECT_NE(read_text_file(scans.folder.file("run/epochs.csv")).find("train/mae,val/loss,val/mae,val/rmse,val/r2"),
            std::string::npos);
  const json::Value summary = json::parse_file(scans.folder.file("run/summary.json"));
  EXPECT_NE(summary.find("best_val_rmse"), nullptr);
  EXPECT_TRUE(summary.find("test")->as_array()[0].find("metrics")->find("mae")->is(json::Type::Number));
  const CliResult eval = run_cli({"eval", "--weights", scans.folder.file("run/best.safetensors"), "--workers", "0"});
  ASSERT_EQ(eval.code, 0) << eval.err;
  EXPECT_NE(eval.out.find("MAE "), std::string::npos) << eval.out;
  const CliResult predict = run_cli({"predict", scans.folder.file("run"), "--input", manifest, "--out",
                                     scans.folder.file("p.csv"), "--workers", "0"});
  ASSERT_EQ(predict.code, 0) << predict.err;
  const data::CsvTable predictions = data::read_csv(scans.folder.file("p.csv"));
  EXPECT_EQ(predictions.columns, (std::vector<std::string>{"image", "mean"}));
  EXPECT_EQ(predictions.rows.size(), 18u);
}

TEST(OwnScans, MultiLabelTrainsOnSeveralZeroOneColumns) {
  const Scans scans(6);
  std::string csv = "image,round,square\n";
  const data::CsvTable table = data::read_csv(scans.manifest);
  for (const auto& row : table.rows)
    csv += row[0] + "," + (row[1] == "ball" ? "1" : "0") + "," + (row[1] == "cube" ? "1" : "0") + "\n";
  const std::string manifest = scans.root + "/labels.csv";
  std::ofstream(manifest) << csv;
  std::vector<std::string> args = tiny(manifest, scans.folder.file("run"));
  args.insert(args.end(), {"--label-columns", "round,square"});
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 labels: round, square"), std::string::npos) << r.out;
  std::ofstream(manifest) << "image,round,square\n" << scans.files[0] << ",1,2\n";
  args.push_back("--check-data");
  EXPECT_NE(run_cli(args).out.find("a multi-label column holds 0 or 1, got '2'"), std::string::npos);
}

// What the run recorded is what predict applies: a new scan's probabilities are the ones
// the split form of predict gives for the same scan, whatever its shape (--resize).
TEST(OwnScans, PredictPreprocessesNewScansAsTrainingDid) {
  const Scans scans(6);
  std::vector<std::string> args = tiny(scans.manifest, scans.folder.file("run"));
  args.insert(args.end(), {"--resize", "10,10,10", "--normalize", "window:-0.5,1.5", "--orientation", "RAS"});
  const CliResult trained = run_cli(args);
  ASSERT_EQ(trained.code, 0) << trained.err;
  const std::string weights = scans.folder.file("run/best.safetensors");
  ASSERT_EQ(run_cli({"predict", "--weights", weights, "--output", scans.folder.file("split.csv"), "--workers", "0"}).code, 0);
  const data::CsvTable by_split = data::read_csv(scans.folder.file("split.csv"));  // the test split, in manifest order
  const data::CsvTable saved = data::read_csv(scans.folder.file("run/split.csv"));
  std::string test_rows = "image\n";
  for (const auto& row : saved.rows) {
    if (row[2] == "test") test_rows += row[0] + "\n";
  }
  std::ofstream(scans.root + "/test.csv") << test_rows;
  const CliResult predict = run_cli({"predict", scans.folder.file("run"), "--input", scans.root + "/test.csv", "--out",
                                     scans.folder.file("new.csv"), "--workers", "0"});
  ASSERT_EQ(predict.code, 0) << predict.err;
  const data::CsvTable by_scan = data::read_csv(scans.folder.file("new.csv"));
  EXPECT_EQ(by_scan.columns, (std::vector<std::string>{"image", "predicted", "ball", "cube", "jack"}));
  ASSERT_EQ(by_scan.rows.size(), by_split.rows.size());
  for (size_t i = 0; i < by_scan.rows.size(); ++i) {
    for (size_t c = 0; c < 3; ++c)
      EXPECT_EQ(std::stod(by_scan.rows[i][2 + c]), std::stod(by_split.rows[i][by_split.column("score_0") + c])) << i;
  }
  // One file of another size, and a folder of them.
  fs::create_directories(scans.folder.file("new"));
  data::nifti::write(scans.folder.file("new/odd.nii.gz"), rand({1, 14, 9, 11}));
  EXPECT_EQ(run_cli({"predict", scans.folder.file("run"), "--input", scans.folder.file("new/odd.nii.gz"), "--out",
                     scans.folder.file("one.csv")}).code, 0);
  EXPECT_EQ(data::read_csv(scans.folder.file("one.csv")).rows.size(), 1u);
  const CliResult folder = run_cli({"predict", scans.folder.file("run"), "--input", scans.root + "/ball", "--out",
                                    scans.folder.file("ball.csv"), "--weights", "final"});
  ASSERT_EQ(folder.code, 0) << folder.err;
  EXPECT_EQ(data::read_csv(scans.folder.file("ball.csv")).rows.size(), 6u);
  EXPECT_EQ(run_cli({"predict", scans.folder.file("run"), "--input", scans.folder.file("none"), "--out", "x.csv"}).code, 1);
  EXPECT_EQ(run_cli({"predict", scans.folder.file("run"), "--input", scans.root + "/ball"}).code, 2);  // no --out
}

// Scans exported in other orientations and spacings (tests/train/scans/, written by
// nibabel): --orientation RAS gives nibabel's closest canonical arrays, --spacing resamples
// from its voxel sizes.
TEST(OwnScans, NibabelsScansLoadAsNibabelReadsThem) {
  const std::string fixtures = std::string(KILN_SOURCE_DIR) + "/tests/train/scans/";
  const data::npz::File expected(fixtures + "expected.npz");
  for (const std::string name : {"lps", "pir", "two_channel"}) {
    const std::string file = fixtures + name + (name == "two_channel" ? ".nii" : ".nii.gz");
    Tensor canonical = expected.load(name + "_canonical");
    canonical = canonical.dim() == 3 ? canonical.unsqueeze(0) : canonical.permute({3, 0, 1, 2});
    EXPECT_TRUE(testing::all_close(data::load_scan({file}, {.reorient_to_ras = true}), canonical, {1e-6, 1e-6})) << name;
    const std::vector<double> zooms = expected.load(name + "_zooms").to_vector<double>();
    const Tensor resampled = data::load_scan({file}, {.reorient_to_ras = true, .spacing = {{1, 1, 1}}});
    for (size_t a = 0; a < 3; ++a)
      EXPECT_EQ(resampled.size(static_cast<int64_t>(a) + 1),
                std::llround(static_cast<double>(canonical.size(static_cast<int64_t>(a) + 1)) * zooms[a]))
          << name << " axis " << a;
  }
  train::TrainConfig config;
  config.dataset = fixtures + "manifest.csv";
  config.orientation = "RAS";
  config.resize = "6,6,6";
  const train::OwnScans scans = train::read_own_scans(config, train::validate(config), "");
  ASSERT_EQ(scans.list.records.size(), 3u);
  EXPECT_NE(train::format_scan_check(scans).find("manifest.csv line 4: 2 channels, but"), std::string::npos)
      << train::format_scan_check(scans);
}

// The MedMNIST route and the own-scans route agree: AdrenalMNIST3D exported to NIfTI files
// and a manifest (data/medmnist_export.h) gives bit-identical input tensors (with MedMNIST's
// ToFloat(1/255) and evaluation scale 0.5 as --normalize scale:0.5/255; --augment=false,
// since MedMNIST's training scale is random) and, for one seed, the same test metrics.
TEST(OwnScans, AdrenalExportedToNiftiMatchesTheMedMnistRoute) {
  if (testing::under_sanitizers()) GTEST_SKIP() << "two runs on AdrenalMNIST3D take minutes under AddressSanitizer; `make test` runs them";
  std::string root;
  const char* env = std::getenv("MEDMNIST_ROOT");
  for (const std::string& candidate :
       std::vector<std::string>{env ? env : "", std::string(KILN_SOURCE_DIR) + "/../shared/data"}) {
    if (!candidate.empty() && fs::exists(candidate + "/adrenalmnist3d.npz")) root = candidate;
  }
  if (root.empty()) GTEST_SKIP() << "no adrenalmnist3d.npz in $MEDMNIST_ROOT or ../shared/data";
  TempFolder folder;
  const data::ExportResult exported = data::export_medmnist("adrenalmnist3d", {.root = root}, folder.file("adrenal"));
  EXPECT_EQ(exported.files, 1584);
  const std::vector<std::string> common = {"--model", "resnet10", "--width", "0.0625", "--epochs", "1",
                                           "--batch-size", "32", "--workers", "2", "--device", "cpu",
                                           "--augment=false", "--seed", "3"};
  train::TrainConfig medmnist;
  medmnist.dataset = "adrenalmnist3d";
  medmnist.data_root = root;
  medmnist.augment = false;
  train::TrainConfig own = medmnist;
  own.dataset = exported.manifest;
  own.normalize = "scale:0.00196078431372549019607843137254902";  // 0.5 / 255
  const train::TrainData a = train::make_train_data(medmnist), b = train::make_train_data(own);
  for (const auto& [x, y, transform_x, transform_y] :
       {std::tuple{a.train, b.train, a.train_transform, b.train_transform},
        std::tuple{a.test, b.test, a.eval_transform, b.eval_transform}}) {
    ASSERT_EQ(x->size(), y->size());
    for (int64_t i = 0; i < x->size(); i += 37) {
      data::Sample s = x->get(i), t = y->get(i);
      Generator g(0);
      transform_x->apply(s, g);
      transform_y->apply(t, g);
      ASSERT_TRUE(testing::all_equal(s.at("image"), t.at("image"))) << i;
      ASSERT_TRUE(testing::all_equal(s.at("label"), t.at("label"))) << i;
    }
  }
  std::vector<std::string> by_flag = {"train", "--dataset", "adrenalmnist3d", "--data-root", root, "--out",
                                      folder.file("flag")};
  std::vector<std::string> by_scans = {"train", "--dataset", exported.manifest, "--normalize", own.normalize, "--out",
                                       folder.file("scans")};
  by_flag.insert(by_flag.end(), common.begin(), common.end());
  by_scans.insert(by_scans.end(), common.begin(), common.end());
  ASSERT_EQ(run_cli(by_flag).code, 0);
  ASSERT_EQ(run_cli(by_scans).code, 0);
  const auto test_of = [&](const std::string& run) {
    return json::dump(*json::parse_file(folder.file(run + "/summary.json")).find("test"));
  };
  EXPECT_EQ(test_of("flag"), test_of("scans"));
}

// `kiln data export` on a MedMNIST file (made here at the official sizes, its MD5 unchecked):
// a NIfTI file per sample holding it as stored, and the manifest.
TEST(OwnScans, ExportWritesEverySampleAndTheManifest) {
  TempFolder folder;
  const data::MedMnistInfo& info = data::medmnist_info("adrenalmnist3d");
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const auto& [split, count] : {std::pair{"train", info.train}, {"val", info.val}, {"test", info.test}}) {
    arrays.emplace_back(std::string(split) + "_images",
                        randint(0, 256, {count, 28, 28, 28}, {.dtype = DType::UInt8}));
    arrays.emplace_back(std::string(split) + "_labels", randint(0, 2, {count, 1}, {.dtype = DType::UInt8}));
  }
  data::npz::save(arrays, folder.file("adrenalmnist3d.npz"), /*compress=*/false);
  const data::MedMnistOptions options{.root = folder.path().string(), .check_md5 = false};
  const data::ExportResult result = data::export_medmnist("adrenalmnist3d", options, folder.file("out"));
  EXPECT_EQ(result.files, info.train + info.val + info.test);
  const data::CsvTable manifest = data::read_csv(result.manifest);
  EXPECT_EQ(manifest.columns, (std::vector<std::string>{"image", "label", "split"}));
  EXPECT_EQ(manifest.rows[info.train].at(0), "val/000000.nii.gz");
  const data::MedMnist3d val("adrenalmnist3d", data::Split::Val, options);
  const data::nifti::Volume volume = data::nifti::read(folder.file("out/val/000000.nii.gz"), {.keep_dtype = true});
  EXPECT_TRUE(testing::all_equal(volume.data, val.get(0).at("image")));
  EXPECT_EQ(manifest.rows[info.train].at(1), std::to_string(val.get(0).at("label").item<int64_t>()));
}

}  // namespace
}  // namespace kiln
