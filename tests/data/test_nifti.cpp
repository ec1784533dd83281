// The NIfTI reader (data/nifti.h): files written by nibabel (tests/data/nifti/
// make_fixtures.py: scaling, the sform, a NIfTI-2 4D volume with a qform, and nibabel's
// closest-canonical reorientation), files this test writes byte by byte from the
// standard's header structs (every stored datatype, .nii and .nii.gz, NIfTI-1 and -2, both
// byte orders; NaN and infinite voxels read as 0, counted and warned once: Note
// [Non-finite NIfTI voxels]), and corrupt, truncated and hostile variants of them (Note
// [NIfTI validation]).
#include <gtest/gtest.h>
#include <nifti1.h>
#include <nifti2.h>
#include <nifti2_io.h>  // swap_nifti_header, for files in the other byte order
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/nifti.h"
#include "core/warning.h"
#include "data/npz.h"
#include "data/volume_file.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using data::nifti::read;
using data::nifti::read_header;

std::string fixture(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/tests/data/nifti/" + name;
}

Tensor affine_tensor(const data::nifti::Header& header) {
  std::vector<double> values;
  for (const auto& row : header.affine) values.insert(values.end(), row.begin(), row.end());
  return tensor(values, {4, 4});
}

TEST(Nifti, ReadsNibabelsFileWithScalingAndItsSform) {
  const data::npz::File expected(fixture("oblique_expected.npz"));
  const data::nifti::Volume scan = read(fixture("oblique.nii.gz"));
  EXPECT_EQ(scan.header.version, 1);
  EXPECT_EQ(scan.header.datatype, "int16");
  EXPECT_EQ(scan.header.dims, (std::vector<int64_t>{5, 4, 3}));
  EXPECT_EQ(scan.header.scl_slope, 0.5);
  EXPECT_EQ(scan.header.scl_inter, -3.0);
  EXPECT_EQ(scan.header.affine_source, "sform");
  EXPECT_EQ(scan.header.orientation, "PSL");
  EXPECT_EQ(scan.header.spatial_units, "unknown");  // nibabel leaves xyzt_units 0
  EXPECT_NEAR(scan.header.spacing[0], 2.0, 1e-6);
  EXPECT_TRUE(testing::all_close(affine_tensor(scan.header), expected.load("affine"), {1e-6, 1e-6}));
  EXPECT_EQ(scan.data.sizes(), (std::vector<int64_t>{1, 5, 4, 3}));
  EXPECT_TRUE(testing::all_equal(scan.data, expected.load("scaled").unsqueeze(0)));
  // Kept as stored: the int16 values widened to int32, no scaling.
  const data::nifti::Volume raw = read(fixture("oblique.nii.gz"), {.keep_dtype = true});
  EXPECT_EQ(raw.data.dtype(), DType::Int32);
  EXPECT_TRUE(testing::all_equal(add(mul(raw.data.to(DType::Float32), 0.5), -3.0), scan.data));
}

TEST(Nifti, ReorientsToTheClosestCanonicalAsNibabelDoes) {
  const data::npz::File expected(fixture("oblique_expected.npz"));
  const data::nifti::Volume scan = read(fixture("oblique.nii.gz"), {.reorient_to_ras = true});
  EXPECT_EQ(scan.header.orientation, "RAS");
  EXPECT_EQ(scan.header.dims, (std::vector<int64_t>{3, 5, 4}));
  EXPECT_TRUE(testing::all_equal(scan.data, expected.load("canonical").unsqueeze(0)));
  EXPECT_TRUE(
      testing::all_close(affine_tensor(scan.header), expected.load("canonical_affine"), {1e-6, 1e-6}));
}

TEST(Nifti, ReadsANifti2FourDimensionalVolumeAsChannels) {
  const data::npz::File expected(fixture("four_d_expected.npz"));
  const data::nifti::Volume scan = read(fixture("four_d.nii"), {.keep_dtype = true});
  EXPECT_EQ(scan.header.version, 2);
  EXPECT_EQ(scan.header.affine_source, "qform");
  EXPECT_EQ(scan.header.dims, (std::vector<int64_t>{3, 4, 2, 2}));
  EXPECT_EQ(scan.data.dtype(), DType::Float64);
  // nibabel's [x, y, z, c] is Kiln's [c, x, y, z].
  EXPECT_TRUE(testing::all_equal(scan.data, expected.load("data").permute({3, 0, 1, 2})));
  EXPECT_TRUE(testing::all_close(affine_tensor(scan.header), expected.load("affine"), {1e-9, 1e-9}));
}

// ---- files written here, byte by byte ------------------------------------------------------

// A NIfTI file's parts: the header struct of its version, then 4 extension bytes, the
// voxels from offset 352 (NIfTI-1) or 544 (NIfTI-2).
struct Spec {
  int version = 1;
  std::vector<int64_t> dims = {3, 2, 2};
  int datatype = DT_FLOAT32;
  std::vector<uint8_t> voxels;  // as stored, little-endian
  double scl_slope = 0, scl_inter = 0;
  bool gzip = false;
  bool big_endian = false;  // header and voxels written in the other byte order
  // Changes applied to the header after it is filled in (hostile variants).
  std::function<void(nifti_1_header&)> edit1 = nullptr;
  std::function<void(nifti_2_header&)> edit2 = nullptr;
};

int bits_of(int datatype) {
  switch (datatype) {
    case DT_UINT8:
    case DT_INT8:
      return 8;
    case DT_INT16:
    case DT_UINT16:
      return 16;
    case DT_INT32:
    case DT_UINT32:
    case DT_FLOAT32:
      return 32;
    case DT_COMPLEX64:
      return 64;
    default:
      return 64;
  }
}

std::string header_bytes(const Spec& spec) {
  std::string bytes;
  if (spec.version == 1) {
    nifti_1_header h{};
    h.sizeof_hdr = 348;
    h.dim[0] = static_cast<short>(spec.dims.size());
    for (size_t d = 0; d < spec.dims.size(); ++d) h.dim[d + 1] = static_cast<short>(spec.dims[d]);
    for (size_t d = spec.dims.size() + 1; d < 8; ++d) h.dim[d] = 1;
    h.datatype = static_cast<short>(spec.datatype);
    h.bitpix = static_cast<short>(bits_of(spec.datatype));
    for (float& p : h.pixdim) p = 1;
    h.vox_offset = 352;
    h.scl_slope = static_cast<float>(spec.scl_slope);
    h.scl_inter = static_cast<float>(spec.scl_inter);
    h.xyzt_units = NIFTI_UNITS_MM;
    std::memcpy(h.magic, "n+1", 4);
    if (spec.edit1) spec.edit1(h);
    if (spec.big_endian) swap_nifti_header(&h, 1);
    bytes.assign(reinterpret_cast<const char*>(&h), sizeof h);
    bytes.append(4, '\0');
  } else {
    nifti_2_header h{};
    h.sizeof_hdr = 540;
    std::memcpy(h.magic, "n+2\0\r\n\032\n", 8);
    h.dim[0] = static_cast<int64_t>(spec.dims.size());
    for (size_t d = 0; d < spec.dims.size(); ++d) h.dim[d + 1] = spec.dims[d];
    for (size_t d = spec.dims.size() + 1; d < 8; ++d) h.dim[d] = 1;
    h.datatype = static_cast<short>(spec.datatype);
    h.bitpix = static_cast<short>(bits_of(spec.datatype));
    for (double& p : h.pixdim) p = 1;
    h.vox_offset = 544;
    h.scl_slope = spec.scl_slope;
    h.scl_inter = spec.scl_inter;
    h.xyzt_units = NIFTI_UNITS_MM;
    if (spec.edit2) spec.edit2(h);
    if (spec.big_endian) swap_nifti_header(&h, 2);
    bytes.assign(reinterpret_cast<const char*>(&h), sizeof h);
    bytes.append(4, '\0');
  }
  return bytes;
}

// This process's folder for the files the tests write, removed with everything in it
// when the process ends.
const fs::path& scratch_folder() {
  struct Folder {
    fs::path path = fs::temp_directory_path() / ("kiln_nifti_" + std::to_string(::getpid()));
    Folder() { fs::create_directories(path); }
    ~Folder() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.path;
}

// Writes the spec's file (gzip-compressed when asked) into this process's scratch folder.
std::string write_file(const Spec& spec, const std::string& name, size_t keep_bytes = SIZE_MAX) {
  const std::string path = (scratch_folder() / name).string();
  std::string bytes = header_bytes(spec);
  std::vector<uint8_t> voxels = spec.voxels;
  const size_t width = static_cast<size_t>(bits_of(spec.datatype) / 8);
  if (spec.big_endian && width > 1)
    for (size_t at = 0; at + width <= voxels.size(); at += width) std::reverse(voxels.begin() + at, voxels.begin() + at + width);
  bytes.append(reinterpret_cast<const char*>(voxels.data()), voxels.size());
  bytes.resize(std::min(bytes.size(), keep_bytes));
  if (spec.gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(file);
  } else {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return path;
}

template <typename T>
std::vector<uint8_t> raw(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

TEST(Nifti, EveryStoredDatatypeInBothVersionsAndCompressions) {
  // Voxel (i, j, k) of a [3, 2, 2] volume holds 10 i + 3 j + k - 4 (negative for the signed types).
  std::vector<double> values;
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j < 2; ++j) {
      for (int i = 0; i < 3; ++i) values.push_back(10 * i + 3 * j + k - 4);  // i fastest, as stored
    }
  }
  std::vector<double> unsigned_values = values;
  for (double& v : unsigned_values) v += 4;
  struct Case {
    int datatype;
    std::vector<uint8_t> voxels;
    DType kept;
    bool is_unsigned;
  };
  const auto as = [&]<typename T>(const std::vector<double>& v) {
    std::vector<T> typed(v.begin(), v.end());
    return raw(typed);
  };
  const std::vector<Case> cases = {
      {DT_UINT8, as.template operator()<uint8_t>(unsigned_values), DType::UInt8, true},
      {DT_INT8, as.template operator()<int8_t>(values), DType::Int32, false},
      {DT_INT16, as.template operator()<int16_t>(values), DType::Int32, false},
      {DT_UINT16, as.template operator()<uint16_t>(unsigned_values), DType::Int32, true},
      {DT_INT32, as.template operator()<int32_t>(values), DType::Int32, false},
      {DT_UINT32, as.template operator()<uint32_t>(unsigned_values), DType::Int64, true},
      {DT_INT64, as.template operator()<int64_t>(values), DType::Int64, false},
      {DT_FLOAT32, as.template operator()<float>(values), DType::Float32, false},
      {DT_FLOAT64, as.template operator()<double>(values), DType::Float64, false},
  };
  for (const Case& c : cases) {
    for (int version : {1, 2}) {
      for (bool gzip : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "datatype " << c.datatype << " NIfTI-" << version << (gzip ? " .gz" : ""));
        const Spec spec{.version = version, .datatype = c.datatype, .voxels = c.voxels, .gzip = gzip};
        const std::string path = write_file(spec, gzip ? "v.nii.gz" : "v.nii");
        const data::nifti::Volume kept = read(path, {.keep_dtype = true});
        EXPECT_EQ(kept.data.dtype(), c.kept);
        EXPECT_EQ(kept.header.version, version);
        // Expected [1, 3, 2, 2]: element (0, i, j, k) = the value stored at i + 3 j + 6 k.
        const Tensor stored = tensor(c.is_unsigned ? unsigned_values : values, {2, 2, 3}).permute({2, 1, 0});
        EXPECT_TRUE(testing::all_equal(kept.data, stored.unsqueeze(0).to(c.kept).contiguous()));
        EXPECT_TRUE(testing::all_equal(read(path).data, stored.unsqueeze(0).to(DType::Float32).contiguous()));
      }
    }
  }
}

// Note [Non-finite NIfTI voxels]: NaN and infinite floats read as 0, counted, in both
// versions, both compressions and both byte orders; load_volume says so once per file.
TEST(Nifti, NonFiniteVoxelsReadAsZeroAndAreCountedAndWarnedOnce) {
  std::vector<float> floats(12, 2.5f);
  floats[1] = NAN;
  floats[5] = INFINITY;
  floats[11] = -INFINITY;
  std::vector<double> doubles(floats.begin(), floats.end());
  for (int version : {1, 2}) {
    for (bool gzip : {false, true}) {
      for (bool big_endian : {false, true}) {
        for (const auto& [datatype, voxels] : {std::pair{DT_FLOAT32, raw(floats)}, std::pair{DT_FLOAT64, raw(doubles)}}) {
          SCOPED_TRACE(::testing::Message() << "NIfTI-" << version << (gzip ? " .gz" : "")
                                            << (big_endian ? " big-endian" : "") << " datatype " << datatype);
          const Spec spec{.version = version, .datatype = datatype, .voxels = voxels, .gzip = gzip, .big_endian = big_endian};
          const data::nifti::Volume volume = read(write_file(spec, gzip ? "nan.nii.gz" : "nan.nii"));
          EXPECT_EQ(volume.non_finite_zeroed, 3);
          const Tensor flat = volume.data.permute({0, 3, 2, 1}).reshape({-1});  // i fastest, as stored
          std::vector<float> expected(12, 2.5f);
          expected[1] = expected[5] = expected[11] = 0;
          EXPECT_TRUE(testing::all_equal(flat, tensor(expected)));
        }
      }
    }
  }
  // Finite voxels count nothing, whatever the byte order.
  EXPECT_EQ(read(write_file({.voxels = raw(std::vector<float>(12, 1.0f)), .big_endian = true}, "fine.nii"))
                .non_finite_zeroed,
            0);
  std::vector<std::string> warnings;
  const WarningSink previous = set_warning_sink([&](const std::string& line) { warnings.push_back(line); });
  const std::string path = write_file({.voxels = raw(floats)}, "warned_" + std::to_string(::getpid()) + ".nii");
  data::load_volume(path);
  data::load_volume(path);
  set_warning_sink(previous);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], path + ": 3 of its 12 voxels are NaN or infinite and were read as 0, as NIfTI readers do");
}

TEST(Nifti, SlopeZeroMeansNoScalingAndTheHeaderAloneReadsNoVoxels) {
  const std::vector<float> values(12, 7.0f);
  const std::string path = write_file({.voxels = raw(values), .scl_slope = 0, .scl_inter = 5}, "noscale.nii");
  EXPECT_TRUE(testing::all_equal(read(path).data, full({1, 3, 2, 2}, 7.0)));
  const std::string scaled =
      write_file({.voxels = raw(values), .scl_slope = 2, .scl_inter = 1}, "scaled.nii");
  EXPECT_TRUE(testing::all_equal(read(scaled).data, full({1, 3, 2, 2}, 15.0)));
  EXPECT_EQ(read_header(scaled).dims, (std::vector<int64_t>{3, 2, 2}));
  // A non-finite slope is no scaling, a non-finite intercept 0 (nifti_clib's rule).
  const std::string nan_slope = write_file(
      {.voxels = raw(values), .edit1 = [](nifti_1_header& h) { h.scl_slope = NAN; }}, "nan_slope.nii");
  EXPECT_TRUE(testing::all_equal(read(nan_slope).data, full({1, 3, 2, 2}, 7.0)));
  const std::string inf_inter = write_file({.voxels = raw(values),
                                            .edit1 =
                                                [](nifti_1_header& h) {
                                                  h.scl_slope = 2;
                                                  h.scl_inter = INFINITY;
                                                }},
                                           "inf_inter.nii");
  EXPECT_TRUE(testing::all_equal(read(inf_inter).data, full({1, 3, 2, 2}, 14.0)));
  // The header of a file whose voxels are cut off is refused too.
  const std::string cut = write_file({.voxels = raw(values)}, "cut.nii", 352 + 10);
  EXPECT_KILN_ERROR(read_header(cut), "cut.nii", "truncated");
}

TEST(Nifti, CorruptTruncatedAndHostileFilesAreErrorsNamingTheFile) {
  const std::vector<float> values(12, 1.0f);
  const auto expect_refused = [&](const Spec& spec, const std::string& name, const std::string& why,
                                  size_t keep = SIZE_MAX) {
    SCOPED_TRACE(name);
    const std::string path = write_file(spec, name, keep);
    EXPECT_KILN_ERROR(read(path), name, why);
  };
  expect_refused({.voxels = raw(values)}, "empty.nii", "not a readable NIfTI", 0);
  EXPECT_KILN_ERROR(read(write_file({}, "x.nii") + ".gone.nii"), "x.nii.gone.nii", "cannot be read");
  expect_refused({.voxels = raw(values)}, "short_header.nii", "not a readable NIfTI", 100);
  expect_refused({.voxels = raw(values), .edit1 = [](nifti_1_header& h) { std::memcpy(h.magic, "xyz", 4); }},
                 "bad_magic.nii", "ANALYZE");
  expect_refused({.voxels = raw(values), .edit1 = [](nifti_1_header& h) { h.datatype = DT_COMPLEX64; }},
                 "complex.nii", "datatype 32");
  expect_refused({.voxels = raw(values),
                  .edit1 =
                      [](nifti_1_header& h) {
                        h.datatype = DT_RGB24;
                        h.bitpix = 24;
                      }},
                 "rgb.nii", "datatype 128");
  expect_refused({.voxels = raw(values),
                  .edit1 =
                      [](nifti_1_header& h) {
                        h.dim[0] = 5;
                        h.dim[4] = 2;
                        h.dim[5] = 2;
                      }},
                 "five_d.nii", "up to 4");
  // dim[0] out of 1..7 and sizes below 1 are refused before nifti_clib sees them (it
  // overflowed its stack on dim[0] = 65536: tests/fuzz/regressions/nifti/).
  expect_refused({.version = 2, .voxels = raw(values), .edit2 = [](nifti_2_header& h) { h.dim[0] = 65536; }},
                 "ndim_65536.nii", "has 65536 dimensions");
  expect_refused({.voxels = raw(values), .edit1 = [](nifti_1_header& h) { h.dim[0] = 0; }}, "ndim_0.nii",
                 "has 0 dimensions");
  expect_refused({.voxels = raw(values), .edit1 = [](nifti_1_header& h) { h.dim[2] = -3; }}, "negative.nii",
                 "has size -3 along dimension 2");
  expect_refused({.voxels = raw(values),
                  .edit1 =
                      [](nifti_1_header& h) {
                        h.dim[2] = 30000;
                        h.dim[3] = 30000;
                      }},
                 "huge.nii", "truncated");
  expect_refused({.voxels = raw(values), .edit1 = [](nifti_1_header& h) { h.vox_offset = 1e9f; }},
                 "far_offset.nii", "truncated");
  // NIfTI-2: 2^60 voxels claimed; compressed: far more than deflate can expand to.
  expect_refused({.version = 2,
                  .voxels = raw(values),
                  .edit2 =
                      [](nifti_2_header& h) {
                        h.dim[1] = int64_t{1} << 20;
                        h.dim[2] = int64_t{1} << 20;
                        h.dim[3] = int64_t{1} << 20;
                      }},
                 "2e60.nii", "truncated");
  expect_refused({.version = 2,
                  .voxels = raw(values),
                  .gzip = true,
                  .edit2 =
                      [](nifti_2_header& h) {
                        h.dim[1] = 4096;
                        h.dim[2] = 4096;
                        h.dim[3] = 4096;
                      }},
                 "bomb.nii.gz", "decompression bomb");
  expect_refused({.voxels = raw(values), .gzip = true}, "cut.nii.gz", "truncated", 352 + 20);
  expect_refused({.voxels = raw(values), .edit1 = [](nifti_1_header& h) { std::memcpy(h.magic, "ni1", 4); }},
                 "two_file.nii", "two-file NIfTI");
  // nifti_clib would read x.hdr for x.img: only .nii and .nii.gz names are taken.
  const std::string img = write_file({.voxels = raw(values)}, "scan.img");
  EXPECT_KILN_ERROR(read(img), "scan.img", "is not named .nii or .nii.gz");
}

// An affine without an orientation (an all-zero sform; a 2-D image's zero spacing along k):
// the volume reads, the orientation is "unknown", and only reorienting it is an error.
TEST(Nifti, ADegenerateAffineReadsButDoesNotReorient) {
  const std::vector<float> values(12, 1.0f);
  const std::string zero_sform = write_file(
      {.voxels = raw(values), .edit1 = [](nifti_1_header& h) { h.sform_code = 1; }}, "zero_sform.nii");
  EXPECT_EQ(read(zero_sform).header.orientation, "unknown");
  EXPECT_KILN_ERROR(read(zero_sform, {.reorient_to_ras = true}), "zero_sform.nii", "cannot be reoriented",
                    "no direction");
  const std::string flat =
      write_file({.dims = {3, 4}, .voxels = raw(values), .edit1 = [](nifti_1_header& h) { h.pixdim[3] = 0; }},
                 "flat.nii");
  const data::nifti::Volume image = read(flat);
  EXPECT_EQ(image.data.sizes(), (std::vector<int64_t>{1, 3, 4, 1}));
}

TEST(Nifti, OrientationOfPermutedAndFlippedAxes) {
  std::array<std::array<double, 4>, 4> affine{};
  affine[0][2] = -2;  // k runs along -x
  affine[1][0] = 1;   // i along +y
  affine[2][1] = -3;  // j along -z
  affine[3][3] = 1;
  const data::nifti::Orientation o = data::nifti::orientation_of(affine);
  EXPECT_EQ(o.axis, (std::array<int, 3>{1, 2, 0}));
  EXPECT_EQ(o.flip, (std::array<bool, 3>{false, true, true}));
  affine[1][0] = 1e-200;  // a denormal-scale axis is a corrupt header, not a geometry
  EXPECT_KILN_ERROR(data::nifti::orientation_of(affine), "no direction");
  affine[1][0] = 0;
  EXPECT_KILN_ERROR(data::nifti::orientation_of(affine), "no direction");
}

}  // namespace
}  // namespace kiln
