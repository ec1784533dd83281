// The NPY reader and writer (data/npy.h) on files the tests build byte by byte from the
// format's description (numpy's NEP 1): every dtype both ways, versions 1.0/2.0/3.0,
// Fortran order, big-endian and widened types, numpy's own header bytes, scalars and empty
// arrays, atomic saves; and corrupt, truncated and hostile files, each refused with an
// error naming the file and the problem (Note [NPY validation]).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/npy.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace npy = data::npy;
using testing::all_equal;

// An NPY file: the prefix of `version` (1, 2 or 3), the header text padded as numpy pads
// (to a multiple of 64 with the prefix, ending in '\n') unless `pad` is false, then `data`.
std::string npy_file(const std::string& dict, const std::string& data, int version = 1, bool pad = true) {
  const size_t prefix = version == 1 ? 10 : 12;
  std::string header = dict;
  if (pad) {
    header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
  }
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

// The bytes of `values` as they are in memory (little-endian here).
template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// The same values with each item's bytes reversed: big-endian.
template <typename T>
std::string big_endian(const std::vector<T>& values) {
  std::string bytes = raw(values);
  for (size_t i = 0; i < bytes.size(); i += sizeof(T))
    std::reverse(bytes.begin() + i, bytes.begin() + i + sizeof(T));
  return bytes;
}

Tensor load(const std::string& bytes) {
  return npy::load_from_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                              "test.npy");
}

npy::Header header_of(const std::string& bytes) {
  return npy::read_header_from_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                                     "test.npy");
}

TEST(Npy, EveryKilnDtypeRoundTrips) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {2, 3, 4}, {0, 3}};
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::Int64, DType::Int32,
                      DType::UInt8, DType::Bool}) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(::testing::Message() << dtype << " " << shape_str(shape));
      const Tensor t = testing::random_for(shape, dtype, 1);
      const Tensor back = load(npy::to_bytes(t));
      EXPECT_EQ(back.dtype(), dtype);
      EXPECT_EQ(back.sizes(), shape);
      EXPECT_TRUE(all_equal(back, t));
    }
  }
}

// np.save(f, np.zeros((3, 4), np.float32)) writes exactly these 128 header bytes.
TEST(Npy, HeaderBytesAreNumpys) {
  const std::string bytes = npy::to_bytes(zeros({3, 4}));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict;
  expected.append(128 - 1 - expected.size(), ' ');
  expected += '\n';
  EXPECT_EQ(bytes.substr(0, 128), expected);
  EXPECT_EQ(bytes.size(), 128u + 48u);
  // Python's tuple repr for one dim and none, and the other dtypes' descr.
  EXPECT_NE(npy::to_bytes(zeros({7}, {.dtype = DType::UInt8}))
                .find("'descr': '|u1', 'fortran_order': False, 'shape': (7,), }"),
            std::string::npos);
  EXPECT_NE(npy::to_bytes(zeros({}, {.dtype = DType::Bool}))
                .find("'descr': '|b1', 'fortran_order': False, 'shape': (), }"),
            std::string::npos);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::Int64, DType::Int32}) {
    EXPECT_EQ(header_of(npy::to_bytes(zeros({2, 2}, {.dtype = dtype}))).data_offset % 64, 0);
  }
}

TEST(Npy, NonContiguousAndNonCpuTensorsSaveTheirValuesInCOrder) {
  const Tensor t = arange(12, {.dtype = DType::Float32}).view({3, 4}).t();
  EXPECT_TRUE(all_equal(load(npy::to_bytes(t)), t.contiguous()));
}

TEST(Npy, BFloat16IsRefusedWithAHint) {
  EXPECT_KILN_ERROR(npy::to_bytes(zeros({2}, {.dtype = DType::BFloat16})), "npy", "bfloat16",
                    "DType::Float32");
}

TEST(Npy, Versions2And3ReadAsVersion1) {
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }";
  for (int version : {1, 2, 3}) {
    const Tensor t = load(npy_file(dict, raw(std::vector<int32_t>{1, 2, 3, 4}), version));
    EXPECT_TRUE(all_equal(t, tensor<int32_t>({1, 2, 3, 4}, {2, 2}))) << version;
    EXPECT_EQ(header_of(npy_file(dict, raw(std::vector<int32_t>{1, 2, 3, 4}), version)).major_version,
              version);
  }
}

// A 2 x 3 array in Fortran order is stored column by column: 1 2 | 3 4 | 5 6 is
// [[1, 3, 5], [2, 4, 6]]. It loads as a view with first-index-fastest strides.
TEST(Npy, FortranOrderLoadsAsATransposedView) {
  const std::string file = npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                                    raw(std::vector<double>{1, 2, 3, 4, 5, 6}));
  const Tensor t = load(file);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(all_equal(t, tensor<double>({1, 3, 5, 2, 4, 6}, {2, 3})));
  const Tensor cube = load(npy_file("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 2, 2), }",
                                    raw(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7})));
  // element [i, j, k] sits at i + 2 j + 4 k
  EXPECT_EQ(cube.select(0, 1).select(0, 0).select(0, 1).item<int64_t>(), 5);
  EXPECT_EQ(cube.select(0, 0).select(0, 1).select(0, 1).item<int64_t>(), 6);
}

// Note [Memory-mapped NPY]: arrays stored as Kiln holds them are mapped, copy-on-write;
// writing to the tensor leaves the file as it was; other arrays are read as usual.
TEST(Npy, MemoryMappedLoadsShareTheFileCopyOnWrite) {
  const testing::TempFolder folder;
  const std::string path = folder.file("big.npy");
  const Tensor values = testing::random_for({64, 33}, DType::Float32, 4);
  npy::save(values, path);
  EXPECT_TRUE(npy::can_map(npy::read_header(path)));
  Tensor mapped = npy::load(path, {.mmap = true});
  EXPECT_TRUE(all_equal(mapped, values));
  mapped.fill_(7.0);  // private pages
  EXPECT_TRUE(all_equal(npy::load(path), values));
  EXPECT_TRUE(all_equal(npy::load(path, {.mmap = true}), values));
  // Fortran order maps as a view; big-endian, bool and widened arrays are read instead.
  const std::string fortran = folder.file("fortran.npy");
  std::ofstream(fortran, std::ios::binary) << npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                                                       raw(std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(all_equal(npy::load(fortran, {.mmap = true}), tensor<double>({1, 3, 5, 2, 4, 6}, {2, 3})));
  const std::string swapped = folder.file("big_endian.npy");
  std::ofstream(swapped, std::ios::binary) << npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                                                       big_endian(std::vector<float>{1.5f, -2.0f}));
  EXPECT_FALSE(npy::can_map(npy::read_header(swapped)));
  EXPECT_TRUE(all_equal(npy::load(swapped, {.mmap = true}), tensor<float>({1.5f, -2.0f})));
  const std::string flags = folder.file("bool.npy");
  npy::save(tensor<bool>({true, false}), flags);
  EXPECT_FALSE(npy::can_map(npy::read_header(flags)));
  // A file shorter than its header claims is refused before anything is mapped.
  const std::string cut = folder.file("cut.npy");
  std::ofstream(cut, std::ios::binary) << npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }",
                                                   raw(std::vector<float>(10, 1.0f)));
  EXPECT_KILN_ERROR(npy::load(cut, {.mmap = true}), "cut.npy");
}

TEST(Npy, BigEndianDataIsSwapped) {
  const Tensor f = load(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }",
                                 big_endian(std::vector<float>{1.5f, -2.0f, 1e30f})));
  EXPECT_TRUE(all_equal(f, tensor<float>({1.5f, -2.0f, 1e30f})));
  const Tensor i = load(npy_file("{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }",
                                 big_endian(std::vector<int64_t>{-3, int64_t{1} << 40})));
  EXPECT_TRUE(all_equal(i, tensor<int64_t>({-3, int64_t{1} << 40})));
}

// Note [NPY dtypes]: types Kiln lacks widen exactly, whatever their byte order.
TEST(Npy, NarrowAndUnsignedIntegersWidenExactly) {
  const auto load_as = [](const std::string& descr, const std::string& data, int64_t n) {
    return load(npy_file(
        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }", data));
  };
  EXPECT_TRUE(
      all_equal(load_as("|i1", raw(std::vector<int8_t>{-128, 0, 127}), 3), tensor<int32_t>({-128, 0, 127})));
  EXPECT_TRUE(all_equal(load_as("<i2", raw(std::vector<int16_t>{-32768, 5, 32767}), 3),
                        tensor<int32_t>({-32768, 5, 32767})));
  EXPECT_TRUE(
      all_equal(load_as(">i2", big_endian(std::vector<int16_t>{-2, 300}), 2), tensor<int32_t>({-2, 300})));
  EXPECT_TRUE(
      all_equal(load_as("<u2", raw(std::vector<uint16_t>{0, 65535}), 2), tensor<int32_t>({0, 65535})));
  EXPECT_TRUE(all_equal(load_as(">u4", big_endian(std::vector<uint32_t>{4294967295u, 7}), 2),
                        tensor<int64_t>({4294967295, 7})));
  EXPECT_EQ(load_as("<u4", raw(std::vector<uint32_t>{1}), 1).dtype(), DType::Int64);
}

// What Python writes that numpy's reader takes: other quotes, key order, spacing,
// trailing commas, Python 2's long suffix, no padding.
TEST(Npy, HeaderSyntaxAsPythonAllows) {
  const std::string data = raw(std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
  for (const std::string& dict : {
           std::string("{\"shape\": (2, 3), \"fortran_order\": False, \"descr\": \"|u1\"}"),
           std::string("{ 'descr' : '|u1' ,'fortran_order':False,'shape':(2,3,) , }"),
           std::string("{'descr': '|u1', 'fortran_order': False, 'shape': (2L, 3L), }"),
           std::string("{'descr':'<u1','fortran_order':False,'shape':(2,3)}\n"),
       }) {
    SCOPED_TRACE(dict);
    EXPECT_TRUE(
        all_equal(load(npy_file(dict, data, 1, /*pad=*/false)), tensor<uint8_t>({1, 2, 3, 4, 5, 6}, {2, 3})));
  }
}

TEST(Npy, ScalarsAndEmptyArrays) {
  const Tensor scalar = load(
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", raw(std::vector<double>{2.5})));
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<double>(), 2.5);
  const Tensor empty_array = load(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 4), }", ""));
  EXPECT_EQ(empty_array.sizes(), (std::vector<int64_t>{0, 4}));
}

TEST(Npy, SaveAndLoadFilesAtomically) {
  const testing::TempFolder folder;
  const std::string path = folder.file("x.npy");
  const Tensor t = testing::random_for({3, 5}, DType::Float32, 2);
  EXPECT_TRUE(npy::save(t, path).durable);
  EXPECT_TRUE(all_equal(npy::load(path), t));
  EXPECT_EQ(npy::read_header(path).shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(folder.entries(), (std::vector<std::string>{"x.npy"}));  // no temporary left behind
  EXPECT_KILN_ERROR(npy::load(folder.file("missing.npy")), "npy", "missing.npy");
  EXPECT_KILN_ERROR(npy::load(folder.path().string()), "npy", "not a regular file");
}

// ---- corrupt, truncated and hostile files ------------------------------------------------------

const std::string kGoodDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
const std::string kGoodData = raw(std::vector<float>{1, 2});

TEST(Npy, RefusesBadPrefixes) {
  const std::string good = npy_file(kGoodDict, kGoodData);
  EXPECT_KILN_ERROR(load(""), "npy: test.npy", "too short");
  EXPECT_KILN_ERROR(load("PK\x03\x04 not numpy at all"), "test.npy", "not an NPY file");
  std::string version = good;
  version[6] = 4;
  EXPECT_KILN_ERROR(load(version), "unknown NPY format version 4.0");
  version[6] = 1;
  version[7] = 1;
  EXPECT_KILN_ERROR(load(version), "version 1.1");
  EXPECT_KILN_ERROR(load(good.substr(0, 11)), "truncated", "header ends at byte 128");
  EXPECT_KILN_ERROR(load(std::string("\x93NUMPY\x02\x00\x10", 9) + std::string(3, '\0')), "truncated");
  // A version 2.0 header claiming 2 GiB: refused before anything is allocated.
  EXPECT_KILN_ERROR(load(std::string("\x93NUMPY\x02\x00\x00\x00\x00\x80", 12) + "{}"),
                    "header of 2147483648 bytes", "1048576");
}

TEST(Npy, RefusesBadHeaders) {
  const struct {
    std::string dict;
    std::vector<std::string> message;
  } cases[] = {
      {"{'descr': '<f4', 'shape': (2,), }", {"lacks 'fortran_order'"}},
      {"{'descr': '<f4', 'fortran_order': False, }", {"lacks 'shape'"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }",
       {"unexpected header key 'extra'"}},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
       {"'descr' appears twice"}},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", {"expected True or False"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", {"expected '('"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", {"non-negative integer"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", {"(n,)"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", {"64 bits"}},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", {"at character 17: expected '}'"}},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }", {"expected ':'"}},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,), }", {"escapes"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", {"unexpected text after the dict"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", {"expected '}'"}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x", {"unterminated string"}},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", {"dtype '<c8'", "f4 f8 f2"}},
      {"{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", {"dtype '<u8'"}},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", {"dtype '|O'"}},
      {"{'descr': '<U10', 'fortran_order': False, 'shape': (2,), }", {"dtype '<U10'"}},
      {"{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", {"dtype '|f4'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dict);
    std::vector<std::string> parts = {"npy: test.npy"};
    parts.insert(parts.end(), c.message.begin(), c.message.end());
    try {
      load(npy_file(c.dict, kGoodData));
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      for (const std::string& part : parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  std::string many_dims = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many_dims += "1, ";
  EXPECT_KILN_ERROR(load(npy_file(many_dims + "), }", raw(std::vector<float>{1}))), "more than 64 dims");
}

TEST(Npy, RefusesSizesTheFileDoesNotHold) {
  EXPECT_KILN_ERROR(load(npy_file(kGoodDict, kGoodData.substr(0, 7))), "needs 8 bytes of data", "has 7",
                    "truncated?");
  EXPECT_KILN_ERROR(load(npy_file(kGoodDict, kGoodData + "x")), "needs 8 bytes of data", "has 9");
  // A header claiming 2^60 elements, or a product past 2^63: refused without allocating.
  EXPECT_KILN_ERROR(
      load(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1073741824), }",
                    kGoodData)),
      "needs 4611686018427387904 bytes");
  EXPECT_KILN_ERROR(
      load(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                    kGoodData)),
      "more elements than fit in 64 bits");
  EXPECT_KILN_ERROR(
      load(
          npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", kGoodData)),
      "more than 2^63");
}

TEST(Npy, RefusesBoolBytesOtherThanZeroAndOne) {
  EXPECT_KILN_ERROR(load(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                  std::string("\x01\x00\x02", 3))),
                    "bool array holds byte 2 at element 2");
}

}  // namespace
}  // namespace kiln
