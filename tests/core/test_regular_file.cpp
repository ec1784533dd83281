// check_regular_file (core/regular_file.h) and FileSource (core/byte_source.h) on what is
// no regular file: a pipe (which would block a reader), a device, a folder and a missing
// path are refused by name, under a watchdog so a regression fails instead of hanging; a
// link to a regular file is accepted.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/byte_source.h"
#include "core/regular_file.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(RegularFile, APipeADeviceAFolderAndAMissingPathAreRefusedByName) {
  const testing::TempFolder folder;
  ASSERT_EQ(::mkfifo(folder.file("pipe").c_str(), 0600), 0);
  testing::with_watchdog(std::chrono::seconds(30), [&] {
    EXPECT_KILN_ERROR(check_regular_file(folder.file("pipe"), "volume file"), "volume file '", "pipe'",
                      "not a regular file");
    EXPECT_KILN_ERROR(check_regular_file("/dev/zero", "CSV"), "CSV '/dev/zero'", "not a regular file");
    EXPECT_KILN_ERROR(check_regular_file(folder.path().string(), "CSV"), "not a regular file");
    EXPECT_KILN_ERROR(check_regular_file(folder.file("none.nii"), "volume file"), "none.nii'", "no such file");
  });
}

TEST(RegularFile, ALinkToARegularFileIsAccepted) {
  const testing::TempFolder folder;
  std::ofstream(folder.file("scan.npy")) << "x";
  std::filesystem::create_symlink(folder.file("scan.npy"), folder.file("link.npy"));
  EXPECT_NO_THROW(check_regular_file(folder.file("scan.npy"), "volume file"));
  EXPECT_NO_THROW(check_regular_file(folder.file("link.npy"), "volume file"));
  std::filesystem::remove(folder.file("scan.npy"));  // a dangling link is a missing file
  EXPECT_KILN_ERROR(check_regular_file(folder.file("link.npy"), "volume file"), "no such file");
}

TEST(RegularFile, AFileSourceOpensAPipeWithoutWaitingForAWriterAndRefusesIt) {
  const testing::TempFolder folder;
  ASSERT_EQ(::mkfifo(folder.file("pipe").c_str(), 0600), 0);
  testing::with_watchdog(std::chrono::seconds(30), [&] {
    EXPECT_KILN_ERROR(FileSource(folder.file("pipe"), "safetensors"), "safetensors: ", "pipe",
                      "is not a regular file");
  });
  EXPECT_KILN_ERROR(FileSource("/dev/zero", "npy"), "npy: /dev/zero is not a regular file");
}

}  // namespace
}  // namespace kiln
