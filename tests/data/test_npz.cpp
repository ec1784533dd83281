// NPZ archives (data/npz.h) over the zip container (data/zip.h): stored and deflated
// round trips, zip64 records, listing from headers only, one array without the others,
// atomic saves; MedMNIST's real archive where MedMNIST keeps it, when present; and broken
// archives (every truncation, flipped bytes, lying sizes, a zip-bomb ratio, encryption,
// unknown methods, duplicate and missing members), each a kiln::Error naming the archive.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/medmnist.h"  // medmnist_path
#include "data/npz.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::npz::File;
namespace zip = data::zip;
using testing::all_equal;

std::span<const uint8_t> span_of(const std::string& bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

std::vector<std::pair<std::string, Tensor>> sample_arrays() {
  return {{"images", testing::random_for({4, 3, 5, 5}, DType::UInt8, 1)},
          {"labels", testing::random_for({4, 1}, DType::Int64, 2)},
          {"weights", testing::random_for({7}, DType::Float32, 3)},
          {"empty", zeros({0, 2})},
          {"scalar", full({}, 2.5, {.dtype = DType::Float64})}};
}

void expect_same_arrays(const File& file, const std::vector<std::pair<std::string, Tensor>>& arrays) {
  const std::vector<data::npz::Array> listed = file.arrays();
  ASSERT_EQ(listed.size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    SCOPED_TRACE(arrays[i].first);
    EXPECT_EQ(listed[i].key, arrays[i].first);
    EXPECT_EQ(listed[i].header.shape, arrays[i].second.sizes());
    EXPECT_EQ(listed[i].header.dtype, arrays[i].second.dtype());
    EXPECT_TRUE(file.contains(arrays[i].first));
    EXPECT_TRUE(all_equal(file.load(arrays[i].first), arrays[i].second));
  }
}

TEST(Npz, StoredAndDeflatedArchivesRoundTrip) {
  const auto arrays = sample_arrays();
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "deflated" : "stored");
    const std::string bytes = data::npz::to_bytes(arrays, compress);
    expect_same_arrays(File(span_of(bytes), "test.npz"), arrays);
  }
}

// Zip64 records in every header and a zip64 end record, as large archives need them.
TEST(Npz, Zip64RecordsAreRead) {
  const auto arrays = sample_arrays();
  std::vector<std::string> files;
  std::vector<zip::NewMember> members;
  files.reserve(arrays.size());
  for (const auto& [key, tensor] : arrays) {
    files.push_back(data::npy::to_bytes(tensor));
    members.push_back({key + ".npy", files.back()});
  }
  for (bool compress : {false, true}) {
    const std::string bytes = zip::write_archive(members, compress, /*force_zip64=*/true);
    expect_same_arrays(File(span_of(bytes), "zip64.npz"), arrays);
  }
}

TEST(Npz, OtherMembersAreNotArrays) {
  const std::string npy = data::npy::to_bytes(ones({2}));
  const std::string bytes =
      zip::write_archive({{"readme.txt", "hello"}, {"x.npy", npy}, {".npy", npy}}, true);
  const File file(span_of(bytes), "mixed.npz");
  ASSERT_EQ(file.arrays().size(), 1u);
  EXPECT_EQ(file.arrays()[0].key, "x");
  EXPECT_KILN_ERROR(file.load("readme"), "npz: mixed.npz has no array 'readme' (it has: x)");
  const zip::Archive archive(span_of(bytes), "mixed.npz");
  const std::vector<uint8_t> text = archive.read(*archive.find("readme.txt"));
  EXPECT_EQ(std::string(text.begin(), text.end()), "hello");
  EXPECT_EQ(archive.read_prefix(*archive.find("x.npy"), 6).size(), 6u);
}

TEST(Npz, SaveAndLoadFilesAtomically) {
  const testing::TempFolder folder;
  const auto arrays = sample_arrays();
  EXPECT_TRUE(data::npz::save(arrays, folder.file("a.npz")).durable);
  expect_same_arrays(File(folder.file("a.npz")), arrays);
  EXPECT_EQ(folder.entries(), (std::vector<std::string>{"a.npz"}));
  EXPECT_KILN_ERROR(data::npz::save({{"x", ones({1})}, {"x", ones({1})}}, folder.file("b.npz")),
                    "array 'x' given twice");
  EXPECT_KILN_ERROR(File(folder.file("missing.npz")), "zip: cannot open", "missing.npz");
}

// ---- real data -------------------------------------------------------------------------------

// adrenalmnist3d.npz (MedMNIST v3, np.savez_compressed), found as MedMnist3d finds it: counts, shapes and
// dtypes from MedMNIST's info.py; a few values numpy 2.4 read from the same file.
TEST(Npz, ReadsMedMnist3dArchives) {
  const std::filesystem::path path = data::medmnist_path("adrenalmnist3d");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path << " (real data is optional)";
  const File file(path.string());
  std::vector<std::string> keys;
  for (const auto& array : file.arrays()) keys.push_back(array.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"train_images", "train_labels", "val_images", "val_labels",
                                            "test_images", "test_labels"}));
  const Tensor images = file.load("val_images");
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{98, 28, 28, 28}));
  EXPECT_EQ(images.dtype(), DType::UInt8);
  const Tensor labels = file.load("train_labels");
  EXPECT_EQ(labels.sizes(), (std::vector<int64_t>{1188, 1}));
  EXPECT_EQ(file.load("test_images").size(0), 298);
  // Values numpy read: the masks are 0 or 255, labels 0 or 1.
  EXPECT_EQ(images.to(DType::Int64).sum().item<int64_t>(), int64_t{8922960});
  EXPECT_EQ(labels.to(DType::Int64).sum().item<int64_t>(), int64_t{259});
}

// ---- broken archives ------------------------------------------------------------------------

std::string small_archive(bool compress) {
  return data::npz::to_bytes({{"a", testing::random_for({3, 4}, DType::Float32, 4)}, {"b", ones({2})}},
                             compress);
}

// Loads everything, so any refusal surfaces.
void load_everything(const std::string& bytes) {
  const File file(span_of(bytes), "bad.npz");
  for (const auto& array : file.arrays()) file.load(array.key);
}

TEST(Npz, EveryTruncationIsAnError) {
  for (bool compress : {false, true}) {
    const std::string bytes = small_archive(compress);
    for (size_t length = 0; length < bytes.size(); ++length) {
      SCOPED_TRACE(length);
      try {
        load_everything(bytes.substr(0, length));
        ADD_FAILURE() << "a truncated archive loaded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("bad.npz"), std::string::npos) << e.what();
      }
    }
  }
}

// Every single flipped byte either leaves the arrays as they were (a byte no reader
// checks, such as a timestamp) or is a kiln::Error naming the archive; never a crash.
TEST(Npz, EveryFlippedByteIsCaughtOrHarmless) {
  for (bool compress : {false, true}) {
    const std::string bytes = small_archive(compress);
    const File good(span_of(bytes), "bad.npz");
    for (size_t at = 0; at < bytes.size(); ++at) {
      std::string broken = bytes;
      broken[at] = static_cast<char>(broken[at] ^ 0x5a);
      try {
        const File file(span_of(broken), "bad.npz");
        for (const char* key : {"a", "b"})
          EXPECT_TRUE(all_equal(file.load(key), good.load(key))) << "byte " << at;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("bad.npz"), std::string::npos) << e.what();
      }
    }
  }
}

// The central directory record of the first member (the archive's first PK\1\2).
size_t first_central_record(const std::string& bytes) { return bytes.find("PK\x01\x02"); }

void put32(std::string& bytes, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(value >> (8 * i));
}

TEST(Npz, RefusesLyingAndUnsupportedMembers) {
  const std::string stored = small_archive(false), deflated = small_archive(true);
  {  // a CRC that does not match the data
    std::string bytes = stored;
    put32(bytes, first_central_record(bytes) + 16, 0x12345678);
    EXPECT_KILN_ERROR(load_everything(bytes), "zip: bad.npz: member 'a.npy': CRC-32 mismatch");
  }
  {  // a declared size past deflate's largest expansion: refused before inflating
    std::string bytes = deflated;
    put32(bytes, first_central_record(bytes) + 24, 0x7fffffff);
    EXPECT_KILN_ERROR(load_everything(bytes), "member 'a.npy' claims 2147483647 bytes", "zip bomb");
  }
  {  // a smaller declared size than the data inflates to: the zip reader refuses the
     // member; loaded as an array, the NPY header already overruns the declared size
    std::string bytes = deflated;
    put32(bytes, first_central_record(bytes) + 24, 100);
    const data::zip::Archive archive(span_of(bytes), "bad.npz");
    EXPECT_KILN_ERROR(archive.read(archive.entries()[0]), "inflates to more than its declared 100 bytes");
    EXPECT_KILN_ERROR(File(span_of(bytes), "bad.npz").load("a"), "bad.npz/a.npy", "truncated");
  }
  {  // encryption and other methods
    std::string bytes = stored;
    bytes[first_central_record(bytes) + 8] = 1;
    EXPECT_KILN_ERROR(load_everything(bytes), "member 'a.npy' is encrypted");
    bytes = stored;
    bytes[first_central_record(bytes) + 10] = 12;
    EXPECT_KILN_ERROR(load_everything(bytes), "compression method 12");
  }
  {  // a member whose data would run past the directory
    std::string bytes = stored;
    put32(bytes, first_central_record(bytes) + 20, 0x100000);
    put32(bytes, first_central_record(bytes) + 24, 0x100000);
    EXPECT_KILN_ERROR(load_everything(bytes), "run past the file");
  }
  {  // two members of one name
    const std::string npy = data::npy::to_bytes(ones({1}));
    EXPECT_KILN_ERROR(File(span_of(zip::write_archive({{"x.npy", npy}, {"x.npy", npy}}, false)), "bad.npz"),
                      "member 'x.npy' appears twice");
  }
  EXPECT_KILN_ERROR(File(span_of(std::string("not a zip archive at all, no")), "bad.npz"),
                    "no end-of-central-directory record");
  EXPECT_KILN_ERROR(File(span_of(std::string("PK")), "bad.npz"), "too short");
  {  // a member that is no NPY file: the npy reader's error names archive and member
    const std::string bytes = zip::write_archive({{"x.npy", "garbage, not numpy"}}, true);
    EXPECT_KILN_ERROR(File(span_of(bytes), "bad.npz").load("x"), "npy: bad.npz/x.npy: not an NPY file");
  }
}

}  // namespace
}  // namespace kiln
