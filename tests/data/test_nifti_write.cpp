// NIfTI writing (data/nifti.h: write): what Kiln writes, Kiln's reader (through the
// reference library) reads back exactly: voxels in every stored type, channels, the
// affine as sform and qform, the spacing; gzip'd or not; atomically; bad volumes and
// names are errors naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/ops.h"
#include "data/nifti.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::TempFolder;

TEST(NiftiWrite, WhatIsWrittenReadsBackExactly) {
  TempFolder folder;
  const std::array<std::array<double, 4>, 4> affine{{{0, 0, -3, 10}, {-2, 0, 0, 20}, {0, 1.5, 0, -5}, {0, 0, 0, 1}}};
  for (const DType dtype : {DType::UInt8, DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
    for (const char* name : {"v.nii", "v.nii.gz"}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + name);
      const Tensor volume = mul(testing::random_for({2, 5, 4, 3}, DType::Float32, 7), 50.0).to(dtype);
      const std::string path = folder.file(name);
      EXPECT_TRUE(data::nifti::write(path, volume, {.affine = affine, .description = "kiln"}).durable);
      const data::nifti::Volume read = data::nifti::read(path, {.keep_dtype = true});
      EXPECT_TRUE(testing::all_equal(read.data, volume.to(read.data.dtype())));
      EXPECT_EQ(read.header.dims, (std::vector<int64_t>{5, 4, 3, 2}));
      EXPECT_EQ(read.header.affine_source, "sform");
      for (size_t r = 0; r < 4; ++r) {
        for (size_t c = 0; c < 4; ++c) EXPECT_NEAR(read.header.affine[r][c], affine[r][c], 1e-6);
      }
      EXPECT_EQ(read.header.spacing, (std::array<double, 3>{2, 1.5, 3}));
      EXPECT_EQ(read.header.description, "kiln");
    }
  }
  EXPECT_EQ(folder.entries(), (std::vector<std::string>{"v.nii", "v.nii.gz"}));  // no temporary left
}

TEST(NiftiWrite, ThreeDimensionsAndTheReadersFloatView) {
  TempFolder folder;
  const Tensor volume = testing::random_for({6, 5, 4}, DType::Float32, 3);
  data::nifti::write(folder.file("s.nii.gz"), volume);
  const data::nifti::Volume read = data::nifti::read(folder.file("s.nii.gz"));
  EXPECT_TRUE(testing::all_equal(read.data, volume.unsqueeze(0)));
  EXPECT_EQ(read.header.orientation, "RAS");
  const Tensor halves = testing::random_for({2, 2, 2}, DType::Float16, 4);
  data::nifti::write(folder.file("h.nii"), halves);
  EXPECT_TRUE(testing::all_equal(data::nifti::read(folder.file("h.nii")).data, halves.to(DType::Float32).unsqueeze(0)));
}

// A single file's voxels start after its header (352 bytes in NIfTI-1): a smaller offset
// (nifti_clib would move it itself, reading other bytes than meant), a negative or a
// non-finite one is refused, as nibabel refuses it.
TEST(NiftiWrite, AVoxelOffsetInsideTheHeaderIsRefused) {
  TempFolder folder;
  const std::string path = folder.file("v.nii");
  for (const float offset : {100.0f, -400.0f, 1e30f, std::nanf("")}) {
    data::nifti::write(path, ones({2, 2, 2}));
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(108);
    file.write(reinterpret_cast<const char*>(&offset), sizeof offset);
    file.close();
    EXPECT_KILN_ERROR(data::nifti::read(path), "v.nii", "vox_offset", "voxels start at byte 352");
  }
}

TEST(NiftiWrite, BadVolumesAndNamesAreErrorsNamingTheFile) {
  TempFolder folder;
  EXPECT_KILN_ERROR(data::nifti::write(folder.file("v.nii.zip"), zeros({2, 2, 2})), "v.nii.zip", ".nii or .nii.gz");
  EXPECT_KILN_ERROR(data::nifti::write(folder.file("v.nii"), zeros({2, 2})), "v.nii", "[X, Y, Z] or [C, X, Y, Z]");
  EXPECT_KILN_ERROR(data::nifti::write(folder.file("v.nii"), zeros({2, 0, 2})), "sizes are 1 to 32767");
  EXPECT_KILN_ERROR(data::nifti::write(folder.file("v.nii"), zeros({2, 2, 2}),
                                       {.affine = {{{0, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}}}),
                    "voxel axis 0 has length 0");
  EXPECT_KILN_ERROR(data::nifti::write(folder.file("no/such/v.nii"), zeros({2, 2, 2})), "v.nii");
  EXPECT_TRUE(folder.entries().empty());
}

}  // namespace
}  // namespace kiln
