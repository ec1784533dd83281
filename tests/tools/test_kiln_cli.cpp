// The `kiln` command through its library functions (tools/cli.h): the inspect table for
// a fixture (golden text), info's content, help, and exit codes with their one-line
// errors (Note [Exit codes]). The binary itself is run by ctest (tools/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "kiln/cpu_features.h"
#include "tests/child_process.h"
#include "tests/test_util.h"
#include "tools/cli.h"

namespace kiln {
namespace {

const std::string kFixtures =
    (std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "data" / "safetensors").string();

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = tools::run_kiln(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(KilnCli, InspectPrintsTheTensorsSortedByName) {
  const std::string path = kFixtures + "/all_dtypes.safetensors";
  const CliResult result = run_cli({"inspect", path});
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out, path + ": 717 bytes (header 616 bytes)\n"
                        "metadata:\n"
                        "  format = pt\n"
                        "tensors:\n"
                        "  name   dtype  shape   bytes\n"
                        "  a.z    F32    [1]         4\n"
                        "  bf16   BF16   [3]         6\n"
                        "  bool   BOOL   [3]         3\n"
                        "  empty  F32    [0, 3]      0\n"
                        "  f16    F16    [2, 2]      8\n"
                        "  f32    F32    [2, 3]     24\n"
                        "  f64    F64    [3]        24\n"
                        "  i32    I32    []          4\n"
                        "  i64    I64    [2]        16\n"
                        "  u8     U8     [4]         4\n"
                        "total: 10 tensors, 27 parameters, 93 bytes of data (93 B)\n");
}

// Note [Tensor checksums]: the list of checksums shows as what it is, not as hex digits.
// Note [OpenMP under load]: `kiln` runs itself again with short OpenMP spins when the user
// set none, and keeps the user's own setting.
TEST(KilnCli, KilnRunsWithShortOpenMpSpinsUnlessTheUserChose) {
  const auto info_with = [](const std::vector<std::string>& env_args) {
    std::vector<std::string> command = {"/usr/bin/env", "-u", "GOMP_SPINCOUNT", "-u", "OMP_WAIT_POLICY", "-u",
                                        "KILN_OPENMP_SPINS"};
    command.insert(command.end(), env_args.begin(), env_args.end());
    command.insert(command.end(), {KILN_CLI, "info"});
    testing::ChildProcess kiln(command);
    EXPECT_EQ(testing::exit_code_of(kiln.wait_for_exit(std::chrono::seconds(60))), 0) << kiln.output();
    return kiln.output();
  };
  EXPECT_NE(info_with({}).find("waiting with GOMP_SPINCOUNT=1000 (set by Kiln)"), std::string::npos);
  EXPECT_NE(info_with({"GOMP_SPINCOUNT=300000"}).find("waiting with GOMP_SPINCOUNT=300000 (yours)"), std::string::npos);
  EXPECT_NE(info_with({"OMP_WAIT_POLICY=passive"}).find("waiting with OMP_WAIT_POLICY=passive (yours)"),
            std::string::npos);
}

TEST(KilnCli, InspectCountsTheChecksumsOfAFileKilnWrote) {
  const std::vector<uint8_t> file =
      safetensors::save_to_bytes({{"a", zeros({2})}, {"b", ones({3})}}, {{"format", "pt"}});
  const std::string text = tools::format_inspect("w", safetensors::read_header_from_bytes(file));
  EXPECT_NE(text.find("metadata:\n"
                      "  format = pt\n"
                      "  kiln.crc32c = a CRC-32C for each of the 2 tensors, checked when the file is loaded\n"),
            std::string::npos)
      << text;
}

TEST(KilnCli, InspectQuotesNamesWithControlCharacters) {
  const std::string text =
      tools::format_inspect("n", safetensors::read_header(kFixtures + "/names.safetensors"));
  EXPECT_NE(text.find("  \"ctl\\t\\u0001\"     F32    [1]        4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  emb\xC3\xA9              F32"), std::string::npos) << text;
  EXPECT_NE(text.find("total: 4 tensors, 4 parameters, 16 bytes of data (16 B)\n"), std::string::npos);
}

TEST(KilnCli, InspectErrorsAreOneLineWithExitCode1) {
  const CliResult corrupt = run_cli({"inspect", kFixtures + "/truncated.safetensors"});
  EXPECT_EQ(corrupt.code, 1);
  EXPECT_EQ(corrupt.out, "");
  EXPECT_EQ(corrupt.err, "kiln: safetensors: " + kFixtures +
                             "/truncated.safetensors: tensor 'bool' ends at byte 93 of the data buffer, "
                             "which has only 92 bytes (truncated file?)\n");
  const CliResult missing = run_cli({"inspect", "/no/such/file.safetensors"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err.rfind("kiln: safetensors: cannot open /no/such/file.safetensors: ", 0), 0u) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1);
}

TEST(KilnCli, InspectReadsNpyHeaders) {
  const testing::TempFolder folder;
  const std::string path = folder.file("x.npy");
  data::npy::save(arange(12, {.dtype = DType::Int32}).view({3, 4}), path);
  const CliResult good = run_cli({"inspect", path});
  EXPECT_EQ(good.code, 0);
  EXPECT_EQ(good.out, path + ": NPY 1.0, 128 bytes of header and 48 of data (48 B)\n"
                             "  dtype <i4 (loads as int32), shape [3, 4], 12 elements, C order\n");
  std::ofstream(folder.file("bad.npy")) << "\x93NUMPY\x09";
  const CliResult bad = run_cli({"inspect", folder.file("bad.npy")});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err.rfind("kiln: npy: " + folder.file("bad.npy") + ": too short", 0), 0u) << bad.err;
}

TEST(KilnCli, InspectListsNpzArrays) {
  const testing::TempFolder folder;
  const std::string path = folder.file("x.npz");
  data::npz::save({{"images", zeros({2, 3}, {.dtype = DType::UInt8})}, {"labels", zeros({2}, {.dtype = DType::Int64})}},
                  path);
  const CliResult good = run_cli({"inspect", path});
  EXPECT_EQ(good.code, 0);
  EXPECT_EQ(good.out, path + ": NPZ, 2 arrays\n"
                             "  images: |u1 (loads as uint8), shape [2, 3], C order, 6 bytes\n"
                             "  labels: <i8 (loads as int64), shape [2], C order, 16 bytes\n"
                             "total: 22 bytes of data (22 B) when loaded\n");
  std::ofstream(folder.file("bad.npz")) << "PK, but not really a zip archive";
  const CliResult bad = run_cli({"inspect", folder.file("bad.npz")});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err.rfind("kiln: zip: " + folder.file("bad.npz") + ": no end-of-central-directory", 0), 0u) << bad.err;
}

TEST(KilnCli, InspectShowsNiftiGeometry) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/tests/data/nifti/oblique.nii.gz";
  const CliResult good = run_cli({"inspect", path});
  EXPECT_EQ(good.code, 0);
  EXPECT_EQ(good.out.rfind(path + ": NIfTI-1, int16, dims [5, 4, 3] (x, y, z)\n"
                                  "  spacing 2 x 1.5 x 3 unknown, orientation PSL\n"
                                  "  scaling: value * 0.5 + -3\n"
                                  "  affine (sform):\n",
                           0),
            0u)
      << good.out;
  const testing::TempFolder folder;
  std::ofstream(folder.file("bad.nii")) << "not a NIfTI header";
  const CliResult bad = run_cli({"inspect", folder.file("bad.nii")});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err.rfind("kiln: NIfTI file '" + folder.file("bad.nii") + "': is not a readable", 0), 0u) << bad.err;
}

TEST(KilnCli, InspectListsAPyTorchCheckpointWithoutRunningIt) {
  const std::string pth = std::string(KILN_SOURCE_DIR) + "/tests/data/pth/";
  const CliResult good = run_cli({"inspect", pth + "checkpoint_zip.pth"});
  EXPECT_EQ(good.code, 0);
  EXPECT_EQ(good.out.rfind(pth + "checkpoint_zip.pth: PyTorch checkpoint (zip format), 18 tensors\nother entries:\n"
                                 "  epoch = 7\n",
                           0),
            0u)
      << good.out;
  EXPECT_NE(good.out.find("  state_dict.transposed      float32   [4, 3]  48\n"), std::string::npos) << good.out;
  const CliResult hostile = run_cli({"inspect", pth + "hostile_os_system.pth"});
  EXPECT_EQ(hostile.code, 1);
  EXPECT_NE(hostile.err.find("refused global"), std::string::npos) << hostile.err;
}

// `kiln convert`: the state dict under 'state_dict' as safetensors, the other entries as
// metadata; --all keeps every tensor by its path; errors exit 1 or 2.
TEST(KilnCli, ConvertWritesTheStateDictAsSafetensors) {
  const std::string pth = std::string(KILN_SOURCE_DIR) + "/tests/data/pth/";
  const testing::TempFolder folder;
  const CliResult good = run_cli({"convert", pth + "checkpoint_legacy.pth", folder.file("w.safetensors")});
  ASSERT_EQ(good.code, 0) << good.err;
  EXPECT_EQ(good.out.rfind("wrote 17 tensors (", 0), 0u) << good.out;
  EXPECT_NE(good.out.find("from its 'state_dict' entry; 14 other entries kept as metadata"), std::string::npos);
  const safetensors::Loaded written = safetensors::load(folder.file("w.safetensors"));
  EXPECT_EQ(written.tensors.size(), 17u);
  EXPECT_EQ(written.metadata.at("pth.epoch"), "7");
  EXPECT_EQ(written.metadata.at("state_dict_under"), "state_dict");
  EXPECT_EQ(written.metadata.at("source_format"), "pth legacy");
  const data::pth::Checkpoint original = data::pth::load(pth + "checkpoint_legacy.pth");
  const safetensors::NamedTensors weights = data::pth::state_dict(original);
  for (size_t i = 0; i < weights.size(); ++i) {
    bool found = false;
    for (const auto& [name, t] : written.tensors) {
      if (name != weights[i].first) continue;
      found = true;
      EXPECT_TRUE(testing::all_equal(t, weights[i].second)) << name;
    }
    EXPECT_TRUE(found) << weights[i].first;
  }
  const CliResult all = run_cli({"convert", pth + "checkpoint_zip.pth", folder.file("all.safetensors"), "--all"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(safetensors::load(folder.file("all.safetensors")).tensors.size(), 18u);
  EXPECT_EQ(run_cli({"convert", pth + "checkpoint_zip.pth"}).code, 2);
  EXPECT_EQ(run_cli({"convert", pth + "checkpoint_zip.pth", folder.file("x.bin")}).code, 1);
  EXPECT_EQ(run_cli({"convert", pth + "hostile_eval_legacy.pth", folder.file("h.safetensors")}).code, 1);
  EXPECT_FALSE(std::filesystem::exists(folder.file("h.safetensors")));
}

TEST(KilnCli, UsageErrorsExitWith2) {
  const CliResult none = run_cli({"inspect"});
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.err, "kiln inspect: needs a FILE\nusage: kiln inspect FILE\n");
  EXPECT_EQ(run_cli({"inspect", "a", "b"}).code, 2);
  EXPECT_EQ(run_cli({"info", "extra"}).code, 2);
  const CliResult empty = run_cli({});
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("usage: kiln <command>"), std::string::npos);
}

TEST(KilnCli, UnknownCommandExitsWith1) {
  const CliResult result = run_cli({"frobnicate"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err, "kiln: unknown command 'frobnicate' (try kiln --help)\n");
}

TEST(KilnCli, HelpListsEveryCommand) {
  for (const char* flag : {"help", "--help", "-h"}) {
    const CliResult result = run_cli({flag});
    EXPECT_EQ(result.code, 0);
    for (const char* command : {"info", "inspect FILE", "help"}) {
      EXPECT_NE(result.out.find(std::string("  ") + command), std::string::npos) << result.out;
    }
  }
  EXPECT_EQ(run_cli({"inspect", "--help"}).out, "usage: kiln inspect FILE\n");
}

TEST(KilnCli, InfoReportsVersionBuildAndCuda) {
  const BuildInfo build = build_info();
  EXPECT_TRUE(std::regex_match(build.version, std::regex(R"(\d+\.\d+\.\d+)"))) << build.version;
  EXPECT_GT(build.openmp_threads, 0);
  const CliResult result = run_cli({"info"});
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.out.rfind("Kiln " + build.version + "\n", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("Eigen " + build.eigen_version), std::string::npos);
  const CudaInfo cuda = cuda_info();
  EXPECT_EQ(cuda.built, build.cuda_built);
  if (cuda.available) {
    ASSERT_FALSE(cuda.devices.empty());
    EXPECT_NE(result.out.find("cuda:0  " + cuda.devices[0].name), std::string::npos) << result.out;
  } else {
    EXPECT_NE(result.out.find("CUDA not available: " + cuda.unavailable_reason), std::string::npos) << result.out;
  }
}

TEST(KilnCli, InfoFormatsDevices) {
  const BuildInfo build{.version = "9.8.7", .build_type = "Debug", .compiler = "GNU 1.2", .eigen_version = "3.4.0",
                        .openmp_version = "201511", .openmp_threads = 4,
                        .openmp_spins = "GOMP_SPINCOUNT=1000 (set by Kiln)", .onednn_version = "2.6.3", .cuda_built = true,
                        .cuda_architectures = "90", .cuda_compiler = "NVIDIA 13.0",
                        .cpu_arch = "x86-64-v3",
                        .cpu_features = {{"avx2", true, true}, {"fma", true, true}, {"avx512f", false, true}}};
  CudaInfo cuda;
  cuda.built = cuda.available = true;
  cuda.runtime_version = "13.0";
  cuda.driver_version = "13.1";
  cuda.cublas_version = "13.1.0";
  cuda.cudnn_version = "9.13.0";
  cuda.nccl_version = "not built";
  cuda.devices.push_back({.index = 0, .name = "NVIDIA H200", .major = 9, .minor = 0,
                          .total_memory = size_t{150} << 30, .multiprocessors = 132});
  EXPECT_EQ(tools::format_info(build, cuda),
            "Kiln 9.8.7\n"
            "build: Debug, GNU 1.2, C++20\n"
            "CPU backend: Eigen 3.4.0, OpenMP 201511 (4 threads, waiting with GOMP_SPINCOUNT=1000 (set by Kiln)), "
            "oneDNN 2.6.3 (convolutions)\n"
            "CPU instruction set: KILN_CPU_ARCH=x86-64-v3, uses avx2 fma\n"
            "  this CPU also has avx512f (a build with -DKILN_CPU_ARCH=native uses them)\n"
            "CUDA backend: built for architectures 90 with NVIDIA 13.0\n"
            "  runtime 13.0, driver 13.1\n"
            "  cuBLAS 13.1.0\n"
            "  cuDNN 9.13.0\n"
            "  NCCL not built\n"
            "devices: 1\n"
            "  cuda:0  NVIDIA H200, compute capability 9.0, 150.0 GiB, 132 SMs\n");
}

TEST(KilnCli, InfoSaysWhichBuiltForExtensionsThisCpuLacks) {
  BuildInfo build{.version = "1", .build_type = "Release", .compiler = "GNU 12", .eigen_version = "3.4.0",
                  .openmp_version = "201511", .openmp_threads = 2, .openmp_spins = "", .onednn_version = "not built",
                  .cuda_built = false, .cuda_architectures = "",
                  .cuda_compiler = "", .cpu_arch = "native",
                  .cpu_features = {{"avx2", true, true}, {"avx512f", true, false}}};
  const std::string text = tools::format_info(build, CudaInfo{});
  EXPECT_NE(text.find("CPU instruction set: KILN_CPU_ARCH=native, uses avx2 avx512f\n"
                      "  this CPU lacks avx512f: this build cannot run here\n"),
            std::string::npos)
      << text;
}

// The build's own row of each extension: what it was compiled for, this machine supports
// (the tests run where they were built), and init() accepted it.
TEST(CpuFeatures, ThisBuildRunsOnThisCpu) {
  const std::vector<CpuFeature> features = cpu_features();
  for (const CpuFeature& feature : features) EXPECT_TRUE(!feature.built || feature.supported) << feature.name;
  EXPECT_NO_THROW(check_cpu_supports_build(features, cpu_arch()));
  EXPECT_FALSE(cpu_arch().empty());
#if defined(__x86_64__) && defined(__AVX2__)
  ASSERT_FALSE(features.empty());
  EXPECT_TRUE(std::any_of(features.begin(), features.end(),
                          [](const CpuFeature& f) { return f.name == "avx2" && f.built; }));
#endif
}

TEST(CpuFeatures, AMissingExtensionIsAnErrorNamingItAndTheFix) {
  const std::vector<CpuFeature> features = {{"avx2", true, true}, {"avx512f", true, false}, {"avx512bw", true, false},
                                            {"fma", false, false}};
  EXPECT_KILN_ERROR(check_cpu_supports_build(features, "native"),
                    "kiln::init: this Kiln was built with KILN_CPU_ARCH=native for CPUs with instructions this CPU "
                    "lacks (avx512f, avx512bw); rebuild it here, or with -DKILN_CPU_ARCH=x86-64-v3");
}

TEST(HumanBytes, BinaryUnitsWithOneDecimal) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(int64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(human_bytes(UINT64_MAX), "16.0 EiB");
}

}  // namespace
}  // namespace kiln
