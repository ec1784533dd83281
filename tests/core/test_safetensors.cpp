// safetensors (core/safetensors.h): round trips of every dtype (scalars, empty tensors,
// non-contiguous inputs, metadata); fixtures written by Python's rules
// (tests/data/safetensors/make_fixtures.py) read back with their values and reproduced
// byte for byte by our writer (without checksums); each tensor's checksum written, a
// flipped bit in any tensor an error naming it and a malformed checksum list an error
// (Note [Tensor checksums]); each corrupt header its own error; every truncation of a
// valid file an error; atomic saves that leave the old file and no temporary behind, and
// keep the mode and the symlink of the file they replace (Note [Atomic save]).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/ops.h"
#include "core/safetensors.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
namespace st = safetensors;
using testing::all_equal;
using testing::TempFolder;

const fs::path kFixtures = fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "safetensors";
const DType kAllTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                           DType::Int64,   DType::Int32,   DType::UInt8,   DType::Bool};

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Distinct values of `dtype` (bools mixed), laid out contiguously.
Tensor sample(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  const Tensor values = testing::random_uniform(sizes, -100, 100, DType::Float64, seed);
  if (dtype == DType::Bool) return values.gt(zeros({}, {.dtype = DType::Float64}));
  if (dtype == DType::UInt8) return values.abs().to(dtype);
  return values.to(dtype);
}

using testing::safetensors_bytes;

const Tensor& find(const st::NamedTensors& tensors, const std::string& name) {
  const Tensor* found = testing::find_named(tensors, name);
  if (found == nullptr) throw Error("no tensor named " + name);
  return *found;
}

// ---- round trips -----------------------------------------------------------------------------

// Note [Save and load argument order]: what is saved, then the path (as Python's
// save_file(tensors, filename, metadata)); the other order does not compile.
template <typename First, typename Second>
constexpr bool save_accepts = requires(const First& first, const Second& second) {
  st::save(first, second);
};

TEST(Safetensors, SaveTakesTheTensorsThenThePath) {
  EXPECT_TRUE((save_accepts<st::NamedTensors, std::string>));
  EXPECT_FALSE((save_accepts<std::string, st::NamedTensors>));
}

TEST(Safetensors, RoundTripsEveryDtypeAndShape) {
  TempFolder folder;
  const fs::path path = folder.path() / "model.safetensors";
  st::NamedTensors tensors;
  uint64_t seed = 1;
  for (const DType dtype : kAllTypes) {
    const std::string code(st::dtype_code(dtype));
    tensors.emplace_back(code + ".matrix", sample({3, 5}, dtype, seed++));
    tensors.emplace_back(code + ".scalar", sample({}, dtype, seed++));
    tensors.emplace_back(code + ".empty", sample({2, 0, 3}, dtype, seed++));
    tensors.emplace_back(code + ".volume", sample({2, 3, 2, 2, 3}, dtype, seed++));
  }
  st::save(tensors, path.string());
  const st::Loaded loaded = st::load(path.string());
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  EXPECT_TRUE(loaded.metadata.empty());
  for (const auto& [name, tensor] : tensors) {
    const Tensor& back = find(loaded.tensors, name);
    EXPECT_EQ(back.dtype(), tensor.dtype()) << name;
    EXPECT_TRUE(all_equal(back, tensor)) << name;
    EXPECT_TRUE(back.is_contiguous());
    EXPECT_FALSE(back.requires_grad());
  }
  // The same bytes from memory.
  EXPECT_EQ(st::save_to_bytes(tensors), read_bytes(path));
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"model.safetensors"});
}

TEST(Safetensors, SavesNonContiguousTensorsByValue) {
  const Tensor base = sample({4, 6}, DType::Float32, 3);
  st::NamedTensors tensors = {
      {"transposed", base.t()},
      {"strided", testing::non_contiguous(sample({3, 4}, DType::Int32, 4))},
      {"expanded", sample({1, 3}, DType::Float64, 5).expand({4, 3})},
      {"narrowed", base.narrow(1, 2, 3)},
      {"requires_grad", sample({2}, DType::Float64, 6).requires_grad_()},
  };
  const st::Loaded loaded = st::load_from_bytes(st::save_to_bytes(tensors));
  for (const auto& [name, tensor] : tensors) {
    const Tensor& back = find(loaded.tensors, name);
    EXPECT_EQ(back.sizes(), tensor.sizes()) << name;
    EXPECT_TRUE(all_equal(back, tensor.detach().contiguous())) << name;
  }
}

TEST(Safetensors, RoundTripsMetadata) {
  const st::Metadata metadata = {{"format", "pt"}, {"epoch", "12"}, {"note \xC3\xA9\n", "quote \" \\"},
                                 {"", ""}};
  const st::Loaded loaded =
      st::load_from_bytes(st::save_to_bytes({{"w", sample({2}, DType::Float32, 1)}}, metadata));
  EXPECT_EQ(loaded.metadata, metadata);
  // Metadata alone, no tensor.
  EXPECT_EQ(st::load_from_bytes(st::save_to_bytes({}, metadata)).metadata, metadata);
}

TEST(Safetensors, LoadsInDataBufferOrder) {
  const st::NamedTensors tensors = {{"b", sample({1}, DType::UInt8, 1)},
                                    {"a", sample({1}, DType::UInt8, 2)},
                                    {"c", sample({1}, DType::Int64, 3)}};
  const st::Loaded loaded = st::load_from_bytes(st::save_to_bytes(tensors));
  ASSERT_EQ(loaded.tensors.size(), 3u);
  EXPECT_EQ(loaded.tensors[0].first, "c");  // 8-byte alignment first
  EXPECT_EQ(loaded.tensors[1].first, "a");
  EXPECT_EQ(loaded.tensors[2].first, "b");
}

TEST(Safetensors, LoadsOntoCuda) {
  if (!cuda_is_available()) GTEST_SKIP() << "needs a CUDA device";
  const st::NamedTensors tensors = {{"w", sample({3, 4}, DType::BFloat16, 1)}};
  const st::Loaded loaded = st::load_from_bytes(st::save_to_bytes(tensors), Device::cuda());
  EXPECT_EQ(loaded.tensors[0].second.device(), Device::cuda());
  EXPECT_TRUE(all_equal(loaded.tensors[0].second.cpu(), tensors[0].second));
  // And a CUDA tensor saves as its values.
  EXPECT_EQ(st::save_to_bytes(loaded.tensors), st::save_to_bytes(tensors));
}

TEST(Safetensors, SaveRejectsBadNames) {
  const Tensor t = sample({2}, DType::Float32, 1);
  EXPECT_KILN_ERROR(st::save_to_bytes({{"a", t}, {"a", t}}), "two tensors are named 'a'");
  EXPECT_KILN_ERROR(st::save_to_bytes({{"__metadata__", t}}), "reserved");
  EXPECT_KILN_ERROR(st::save_to_bytes({{"a", Tensor()}}), "tensor 'a' is undefined");
}

// ---- fixtures written by Python's rules -------------------------------------------------------

TEST(Safetensors, ReadsTheAllDtypesFixture) {
  const st::Loaded loaded = st::load((kFixtures / "all_dtypes.safetensors").string());
  EXPECT_EQ(loaded.metadata, (st::Metadata{{"format", "pt"}}));
  ASSERT_EQ(loaded.tensors.size(), 10u);
  const auto& t = loaded.tensors;
  EXPECT_TRUE(all_equal(find(t, "f32"), tensor<float>({0.5f, -1.25f, 2, 3.75f, -4.5f, 6}, {2, 3})));
  EXPECT_TRUE(all_equal(find(t, "a.z"), tensor<float>({7})));
  EXPECT_TRUE(all_equal(find(t, "empty"), zeros({0, 3})));
  EXPECT_TRUE(all_equal(find(t, "f64"), tensor<double>({0.1, -2.5, 1e300})));
  EXPECT_TRUE(all_equal(find(t, "f16"),
                        tensor<double>({1.5, -0.25, 65504, 1.0 / 1024}, {2, 2}).to(DType::Float16)));
  EXPECT_TRUE(all_equal(find(t, "bf16"), tensor<double>({1.5, -2, 0.15625}).to(DType::BFloat16)));
  EXPECT_TRUE(all_equal(find(t, "i64"), tensor<int64_t>({INT64_MIN, INT64_MAX})));
  EXPECT_TRUE(all_equal(find(t, "i32"), full({}, -7, {.dtype = DType::Int32})));
  EXPECT_TRUE(all_equal(find(t, "u8"), tensor<uint8_t>({0, 1, 128, 255})));
  EXPECT_TRUE(all_equal(find(t, "bool"), tensor<bool>({true, false, true})));
}

TEST(Safetensors, ReadsNamesWithEscapesAndUnicode) {
  const st::Loaded loaded = st::load((kFixtures / "names.safetensors").string());
  ASSERT_EQ(loaded.tensors.size(), 4u);
  EXPECT_TRUE(all_equal(find(loaded.tensors, "emb\xC3\xA9"), tensor<float>({1})));
  EXPECT_TRUE(all_equal(find(loaded.tensors, "quote\"back\\slash"), tensor<float>({2})));
  EXPECT_TRUE(all_equal(find(loaded.tensors, "ctl\t\x01"), tensor<float>({3})));
  EXPECT_TRUE(all_equal(find(loaded.tensors, "\xF0\x9F\x98\x80"), tensor<float>({4})));
}

TEST(Safetensors, WriterReproducesPythonFixturesByteForByte) {
  for (const char* name : {"all_dtypes.safetensors", "names.safetensors", "empty.safetensors"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> expected = read_bytes(kFixtures / name);
    ASSERT_FALSE(expected.empty());
    st::Loaded loaded = st::load_from_bytes(expected);
    // The order tensors are given in must not matter.
    std::reverse(loaded.tensors.begin(), loaded.tensors.end());
    // Python writes no checksums (Note [Tensor checksums]).
    EXPECT_EQ(st::save_to_bytes(loaded.tensors, loaded.metadata, st::Checksums::Omit), expected);
    TempFolder folder;
    st::save(loaded.tensors, (folder.path() / name).string(), loaded.metadata, st::Checksums::Omit);
    EXPECT_EQ(read_bytes(folder.path() / name), expected);
  }
}

// ---- Note [Tensor checksums] ------------------------------------------------------------------

// Where tensor `name`'s bytes start in a file's bytes.
size_t data_start_of(const std::vector<uint8_t>& file, const std::string& name) {
  const st::Header header = st::read_header_from_bytes(file);
  for (const st::TensorInfo& info : header.tensors)
    if (info.name == name) return static_cast<size_t>(8 + header.header_bytes + info.data_begin);
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

st::NamedTensors three_tensors() {
  return {{"weight", testing::random_uniform({3, 4}, -1, 1, DType::Float32, 1)},
          {"steps", tensor<int64_t>({7, 8})},
          {"mask", tensor<bool>({true, false, true})}};
}

TEST(Safetensors, EveryTensorCarriesItsChecksumInDataBufferOrder) {
  const st::NamedTensors tensors = three_tensors();
  const std::vector<uint8_t> file = st::save_to_bytes(tensors, {{"note", "kept"}});
  const st::Header header = st::read_header_from_bytes(file);
  ASSERT_EQ(header.tensors.size(), 3u);
  // Data-buffer order is steps (I64), weight (F32), mask (BOOL); each CRC is that of the bytes.
  std::string expected;
  for (const st::TensorInfo& info : header.tensors) {
    const size_t at = data_start_of(file, info.name);
    if (!expected.empty()) expected += ' ';
    expected += crc32c_hex(crc32c(file.data() + at, static_cast<size_t>(info.nbytes())));
  }
  EXPECT_EQ(header.metadata.at("kiln.crc32c"), expected);
  EXPECT_EQ(expected.size(), 3u * 9 - 1);
  // load() checks them and returns the caller's metadata only.
  const st::Loaded loaded = st::load_from_bytes(file);
  EXPECT_EQ(loaded.metadata, (st::Metadata{{"note", "kept"}}));
  // A checksum given as metadata is the writer's to set: it is replaced, never trusted.
  const std::vector<uint8_t> again = st::save_to_bytes(tensors, {{"note", "kept"}, {"kiln.crc32c", "00000000"}});
  EXPECT_EQ(again, file);
  // An empty file lists no checksums and loads.
  EXPECT_TRUE(st::load_from_bytes(st::save_to_bytes({})).tensors.empty());
  // The list is filled in after the data, where the key's value is: a name or a value
  // holding the key's quoted text (escaped in the header) does not mislead it.
  const std::string lookalike = "\"kiln.crc32c\":\"";
  const st::NamedTensors tricky = {{lookalike + "w", ones({4})}, {"b", zeros({2})}};
  const std::vector<uint8_t> tricky_file = st::save_to_bytes(tricky, {{"a", lookalike + "ffffffff"}});
  const st::Loaded tricky_loaded = st::load_from_bytes(tricky_file);
  EXPECT_EQ(tricky_loaded.metadata.at("a"), lookalike + "ffffffff");
  EXPECT_EQ(tricky_loaded.tensors.size(), 2u);
}

TEST(Safetensors, AFlippedBitInAnyTensorIsAnErrorNamingIt) {
  const std::vector<uint8_t> file = st::save_to_bytes(three_tensors());
  const st::Header header = st::read_header_from_bytes(file);
  for (const st::TensorInfo& info : header.tensors) {
    for (int64_t byte = 0; byte < info.nbytes(); byte += 5) {
      for (const int bit : {0, 7}) {
        SCOPED_TRACE(info.name + ", byte " + std::to_string(byte) + ", bit " + std::to_string(bit));
        std::vector<uint8_t> damaged = file;
        damaged[data_start_of(file, info.name) + static_cast<size_t>(byte)] ^= static_cast<uint8_t>(1u << bit);
        EXPECT_KILN_ERROR(st::load_from_bytes(damaged, Device::cpu(), "run/last.safetensors"),
                          "safetensors: run/last.safetensors: tensor '" + info.name +
                              "' does not match its checksum");
      }
    }
  }
  // Unchecked, the same damage loads (a mask byte 0 -> 1 stays a valid bool): the
  // checksum is what catches it.
  std::vector<uint8_t> unchecked = st::save_to_bytes(three_tensors(), {}, st::Checksums::Omit);
  unchecked[data_start_of(unchecked, "mask") + 1] ^= 1u;
  EXPECT_TRUE(st::load_from_bytes(unchecked).tensors.size() == 3);
}

TEST(Safetensors, AMalformedChecksumListIsAnError) {
  const st::NamedTensors tensors = three_tensors();
  // The file with `list` as its checksums, the header rebuilt by hand: what a damaged or
  // hostile header holds (the writer never writes a bad list).
  const std::vector<uint8_t> plain = st::save_to_bytes(tensors, {}, st::Checksums::Omit);
  const int64_t header_bytes = st::read_header_from_bytes(plain).header_bytes;
  const auto with_list = [&](const std::string& list) {
    std::string text(plain.begin() + 8, plain.begin() + 8 + header_bytes);
    text.insert(1, "\"__metadata__\":{\"kiln.crc32c\":\"" + list + "\"},");
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string file;
    for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>(uint64_t{text.size()} >> (8 * i)));
    file += text;
    file.append(plain.begin() + 8 + header_bytes, plain.end());
    return std::vector<uint8_t>(file.begin(), file.end());
  };
  const std::string good = st::read_header_from_bytes(st::save_to_bytes(tensors)).metadata.at("kiln.crc32c");
  EXPECT_EQ(st::load_from_bytes(with_list(good)).tensors.size(), 3u);  // the hand-built header is sound
  EXPECT_KILN_ERROR(st::load_from_bytes(with_list(good.substr(0, 17))),
                    "metadata \"kiln.crc32c\" lists 2 checksums for 3 tensors");
  EXPECT_KILN_ERROR(st::load_from_bytes(with_list(good + " 00000000")),
                    "metadata \"kiln.crc32c\" lists 4 checksums for 3 tensors");
  EXPECT_KILN_ERROR(st::load_from_bytes(with_list("0000000g " + good.substr(9))),
                    "holds \"0000000g\", which is not 8 lowercase hex digits");
  EXPECT_KILN_ERROR(st::load_from_bytes(with_list("ABCDEF01 " + good.substr(9))), "not 8 lowercase hex digits");
  EXPECT_KILN_ERROR(st::load_from_bytes(with_list("-1234567 " + good.substr(9))), "not 8 lowercase hex digits");
  EXPECT_KILN_ERROR(st::load_from_bytes(with_list(good.substr(0, 8) + "  " + good.substr(9))),
                    "lists 4 checksums for 3 tensors");
}

TEST(Safetensors, ReadHeaderDescribesWithoutReadingData) {
  const st::Header header = st::read_header((kFixtures / "all_dtypes.safetensors").string());
  EXPECT_EQ(header.file_bytes, 717);
  EXPECT_EQ(header.header_bytes % 8, 0);
  ASSERT_EQ(header.tensors.size(), 10u);
  EXPECT_EQ(header.tensors[0].name, "i64");
  EXPECT_EQ(header.tensors[0].dtype, "I64");
  EXPECT_EQ(header.tensors[0].data_begin, 0);
  EXPECT_EQ(header.tensors[0].data_end, 16);
  EXPECT_EQ(header.tensors[2].name, "a.z");
  EXPECT_EQ(header.tensors[5].shape, std::vector<int64_t>{});  // i32, a scalar
  EXPECT_EQ(header.tensors[5].numel(), 1);
  EXPECT_EQ(header.metadata.at("format"), "pt");
}

// ---- corrupt files ---------------------------------------------------------------------------

struct CorruptCase {
  const char* what;
  std::string header;
  size_t data_bytes;
  std::vector<std::string> message;
};

TEST(Safetensors, EachCorruptHeaderHasItsOwnError) {
  const std::string f32 = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  const std::vector<CorruptCase> cases = {
      {"not JSON", R"({"a":)", 0, {"header is not valid JSON", "unexpected end of text"}},
      {"not an object", "[1,2]", 0, {"header must be a JSON object, found an array"}},
      {"not UTF-8", "{\"a\xFF\":{" + f32 + "}}", 8, {"header is not valid JSON", "invalid UTF-8"}},
      {"entry not an object", R"({"a":3})", 0, {"tensor 'a' must be a JSON object, found an integer"}},
      {"no dtype", R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8, {"tensor 'a' has no \"dtype\" field"}},
      {"dtype not a string", R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8,
       {"\"dtype\" must be a string, found an integer"}},
      {"unknown dtype", R"({"a":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}})", 8,
       {"tensor 'a' has unknown dtype \"F128\""}},
      {"no shape", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8, {"has no \"shape\" field"}},
      {"negative shape", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
       {"shape must hold non-negative integers, found -2"}},
      {"fractional shape", R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8,
       {"shape must hold non-negative integers, found a number"}},
      {"shape overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
       {"shape [4294967296, 4294967296] overflows 64-bit sizes"}},
      {"no offsets", R"({"a":{"dtype":"F32","shape":[2]}})", 8, {"has no \"data_offsets\" field"}},
      {"one offset", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8,
       {"data_offsets must be [begin, end], found 1 values"}},
      {"three offsets", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8,
       {"data_offsets must be [begin, end], found 3 values"}},
      {"negative offset", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[-1,-1]}})", 0,
       {"data_offsets must hold non-negative integers, found -1"}},
      {"begin after end", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8,
       {"data_offsets [8, 0] begin after they end"}},
      {"size mismatch", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4,
       {"F32 shape [2] needs 8 bytes but data_offsets [0, 4] hold 4"}},
      {"past the data", "{\"a\":{" + f32 + "}}", 4,
       {"tensor 'a' ends at byte 8 of the data buffer, which has only 4 bytes"}},
      {"overlap", "{\"a\":{" + f32 + R"(},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12,
       {"tensors 'a' and 'b' overlap (bytes [4, 8)"}},
      {"gap", "{\"a\":{" + f32 + R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", 16,
       {"gap in the data buffer: bytes [8, 12) belong to no tensor (before 'b')"}},
      {"hole at the start", R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
       {"gap in the data buffer: bytes [0, 4)"}},
      {"trailing bytes", "{\"a\":{" + f32 + "}}", 12, {"the data buffer has 12 bytes but the tensors cover only 8"}},
      {"duplicate name", "{\"a\":{" + f32 + "},\"a\":{" + f32 + "}}", 8, {"duplicate key \"a\""}},
      {"duplicate field", "{\"a\":{" + f32 + R"(,"dtype":"F32"}})", 8,
       {"header is not valid JSON", "duplicate key \"dtype\""}},
      {"bad JSON in an ignored field", "{\"a\":{" + f32 + R"(,"extra":[{"k":1,"k":2}]}})", 8,
       {"header is not valid JSON", "duplicate key \"k\""}},
      {"trailing text", "{\"a\":{" + f32 + "}} x", 8, {"header is not valid JSON", "unexpected 'x' after the value"}},
      {"metadata not an object", R"({"__metadata__":["x"]})", 0,
       {"\"__metadata__\" must be an object of strings, found an array"}},
      {"metadata value not a string", R"({"__metadata__":{"epoch":3}})", 0,
       {"\"__metadata__\" value of \"epoch\" must be a string, found an integer"}},
  };
  for (const CorruptCase& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::string> parts = c.message;
    parts.push_back("safetensors: <memory>: ");
    try {
      st::load_from_bytes(safetensors_bytes(c.header, c.data_bytes));
      ADD_FAILURE() << "no error for: " << c.what;
    } catch (const Error& e) {
      for (const std::string& part : parts) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what() << "\nlacks: " << part;
      }
    }
  }
}

TEST(Safetensors, AcceptsWhatPythonAccepts) {
  // Pretty-printed, entries out of offset order, unknown fields, null metadata, padding.
  const std::string header =
      "{ \"b\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [8, 10], \"extra\": 1,\n"
      "         \"nested\": {\"shape\": [\"not\", \"ours\"], \"x\": [null, 1.5, {}]}},\n"
      "  \"__metadata__\": null,\n"
      "  \"a\": {\"shape\": [2], \"data_offsets\": [0, 8], \"dtype\": \"F32\"} }    \n ";
  const st::Loaded loaded = st::load_from_bytes(safetensors_bytes(header, 10));
  ASSERT_EQ(loaded.tensors.size(), 2u);
  EXPECT_EQ(loaded.tensors[0].first, "a");
  EXPECT_TRUE(all_equal(loaded.tensors[1].second, tensor<uint8_t>({0, 1})));
  EXPECT_TRUE(loaded.metadata.empty());
  // Zero-byte tensors may share an offset.
  const st::Loaded empties = st::load_from_bytes(safetensors_bytes(
      R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"y":{"dtype":"I64","shape":[3,0],"data_offsets":[0,0]}})", 0));
  EXPECT_EQ(empties.tensors.size(), 2u);
}

// A spec-valid empty tensor with a huge dim ([0, 2^62]: 0 bytes, as Python reads it)
// loads; reducing over its empty dim once wrote a [2^62] output into a 0-byte allocation
// (the byte count wrapped). Now the output's size is refused before anything is written.
TEST(Safetensors, EmptyTensorsWithHugeDimsLoadAndReduceSafely) {
  const std::string big = std::to_string(int64_t{1} << 62);
  const std::vector<uint8_t> bytes =
      safetensors_bytes(R"({"x":{"dtype":"F32","shape":[0,)" + big + R"(],"data_offsets":[0,0]}})", 0);
  const st::Loaded loaded = st::load_from_bytes(bytes);
  const Tensor& x = find(loaded.tensors, "x");
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{0, int64_t{1} << 62}));
  EXPECT_EQ(x.numel(), 0);
  EXPECT_KILN_ERROR(x.sum({0}), "elements of float32 are more than 2^63 - 1 bytes");
  EXPECT_EQ(x.sum({1}).sizes(), (std::vector<int64_t>{0}));
  EXPECT_EQ(x.sum().item<float>(), 0.0f);
  // A partial product that overflows is refused, as Python refuses it, even before a 0.
  EXPECT_KILN_ERROR(st::load_from_bytes(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[)" + big + "," + big +
                                                  R"(,0],"data_offsets":[0,0]}})",
                                                  0)),
                    "overflows 64-bit sizes");
}

TEST(Safetensors, LengthFieldErrors) {
  EXPECT_KILN_ERROR(st::load_from_bytes(std::vector<uint8_t>{1, 0, 0}), "file is 3 bytes, too short");
  std::vector<uint8_t> huge = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'};  // 100'000'001
  EXPECT_KILN_ERROR(st::load_from_bytes(huge), "header length 100000001 exceeds the limit of 100000000");
  std::vector<uint8_t> max = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_KILN_ERROR(st::load_from_bytes(max), "header length 18446744073709551615 exceeds the limit");
  std::vector<uint8_t> past = {16, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  EXPECT_KILN_ERROR(st::load_from_bytes(past), "header length 16 runs past the end of the file (10 bytes");
}

TEST(Safetensors, UnsupportedDtypeIsDescribedButNotLoaded) {
  const std::vector<uint8_t> file = safetensors_bytes(R"({"q":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4);
  const st::Header header = st::read_header_from_bytes(file);
  EXPECT_EQ(header.tensors[0].dtype, "I8");
  EXPECT_KILN_ERROR(st::load_from_bytes(file), "tensor 'q' has dtype I8, which Kiln tensors cannot hold");
}

TEST(Safetensors, BoolBytesMustBeZeroOrOne) {
  std::vector<uint8_t> file = safetensors_bytes(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", 3);
  file.back() = 2;
  EXPECT_KILN_ERROR(st::load_from_bytes(file), "BOOL tensor 'm' holds byte 2 at element 2");
}

TEST(Safetensors, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = read_bytes(kFixtures / "all_dtypes.safetensors");
  ASSERT_EQ(full.size(), 717u);
  for (size_t length = 0; length < full.size(); ++length) {
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(length));
    EXPECT_THROW(st::load_from_bytes(prefix), Error) << "length " << length;
    EXPECT_THROW(st::read_header_from_bytes(prefix), Error) << "length " << length;
  }
  std::vector<uint8_t> longer = full;
  longer.push_back(0);
  EXPECT_KILN_ERROR(st::load_from_bytes(longer), "cover only");
  // A truncated file on disk names the file.
  TempFolder folder;
  const fs::path path = folder.path() / "cut.safetensors";
  write_bytes(path, std::vector<uint8_t>(full.begin(), full.end() - 1));
  EXPECT_KILN_ERROR(st::load(path.string()), path.string(), "which has only");
}

TEST(Safetensors, FileErrorsNameTheFile) {
  EXPECT_KILN_ERROR(st::load("/nonexistent/kiln/model.safetensors"), "cannot open /nonexistent/kiln/model.safetensors");
  TempFolder folder;
  EXPECT_KILN_ERROR(st::read_header(folder.path().string()), "is not a regular file");
}

// ---- atomic saves ------------------------------------------------------------------------------

TEST(Safetensors, FailedSaveLeavesTheOldFileAndNoTemporary) {
  TempFolder folder;
  const fs::path path = folder.path() / "ckpt.safetensors";
  const st::NamedTensors old_tensors = {{"w", sample({4}, DType::Float32, 1)}};
  st::save(old_tensors, path.string());
  const std::vector<uint8_t> old_bytes = read_bytes(path);
  // Rejected before anything is written.
  EXPECT_KILN_ERROR(st::save({{"w", sample({4}, DType::Float32, 2)}, {"u", Tensor()}}, path.string()),
                    "tensor 'u' is undefined");
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"ckpt.safetensors"});
  // Into a folder that does not exist.
  EXPECT_KILN_ERROR(st::save(old_tensors, (folder.path() / "missing" / "x.safetensors").string()),
                    "cannot create a temporary file");
  // A folder is not replaced (nor is a temporary file made for it).
  fs::create_directory(folder.path() / "dir.safetensors");
  EXPECT_KILN_ERROR(st::save(old_tensors, (folder.path() / "dir.safetensors").string()), "is not a regular file");
  EXPECT_EQ(folder.entries(), (std::vector<std::string>{"ckpt.safetensors", "dir.safetensors"}));
}

// A name or metadata string that is not valid UTF-8 was once written, and the file could
// then not be loaded. Now save refuses it with the reader's words, before writing a byte.
TEST(Safetensors, SaveRefusesWhatLoadWouldRefuse) {
  TempFolder folder;
  const fs::path path = folder.path() / "ckpt.safetensors";
  const st::NamedTensors old_tensors = {{"w", sample({4}, DType::Float32, 1)}};
  st::save(old_tensors, path.string());
  const std::vector<uint8_t> old_bytes = read_bytes(path);
  const Tensor t = sample({2}, DType::Float32, 2);
  EXPECT_KILN_ERROR(st::save({{"w\xFF", t}}, path.string()), "safetensors: save: tensor name \"w\\xff\"",
                    "invalid UTF-8 byte \\xff in a string at byte 1");
  EXPECT_KILN_ERROR(st::save({{"ok", t}, {"\xC3", t}}, path.string()), "tensor name", "truncated UTF-8 sequence");
  EXPECT_KILN_ERROR(st::save({{"\xC0\xAF", t}}, path.string()), "invalid UTF-8 byte \\xc0");  // overlong '/'
  EXPECT_KILN_ERROR(st::save({{"\xED\xA0\x80", t}}, path.string()), "invalid UTF-8 sequence");  // a surrogate
  EXPECT_KILN_ERROR(st::save(old_tensors, path.string(), {{"k\xFE", "v"}}), "metadata key \"k\\xfe\"");
  EXPECT_KILN_ERROR(st::save(old_tensors, path.string(), {{"k", "v\x80"}}), "metadata value of \"k\"",
                    "invalid UTF-8 byte \\x80 in a string at byte 1");
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"ckpt.safetensors"});
  // Valid multi-byte names still round-trip.
  st::save({{"gewicht-\xC3\xA9-\xF0\x9F\x98\x80", t}}, path.string(), {{"\xE2\x82\xAC", "\xC3\xA9"}});
  const st::Loaded loaded = st::load(path.string());
  ASSERT_EQ(loaded.tensors.size(), 1u);
  EXPECT_EQ(loaded.tensors[0].first, "gewicht-\xC3\xA9-\xF0\x9F\x98\x80");
  EXPECT_EQ(loaded.metadata.at("\xE2\x82\xAC"), "\xC3\xA9");
}

TEST(Safetensors, WriteFailureMidFileLeavesTheOldFile) {
  // A file-size limit makes write() fail with EFBIG partway through the data (SIGXFSZ
  // ignored so the failure is an error return, not a signal).
  TempFolder folder;
  const fs::path path = folder.path() / "ckpt.safetensors";
  st::save({{"w", sample({4}, DType::Float32, 1)}}, path.string());
  const std::vector<uint8_t> old_bytes = read_bytes(path);

  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 64 * 1024;
  auto* previous_handler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  bool threw = false;
  try {
    st::save({{"big", zeros({256 * 1024})}}, path.string());  // 1 MiB of data
  } catch (const Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("write("), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(EFBIG)), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, previous_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST(Safetensors, ReadOnlyFolderIsAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores folder permissions";
  TempFolder folder;
  const fs::path path = folder.path() / "ckpt.safetensors";
  st::save({{"w", sample({4}, DType::Float32, 1)}}, path.string());
  const std::vector<uint8_t> old_bytes = read_bytes(path);
  fs::permissions(folder.path(), fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_KILN_ERROR(st::save({{"w", sample({4}, DType::Float32, 2)}}, path.string()),
                    "cannot create a temporary file");
  fs::permissions(folder.path(), fs::perms::owner_all);
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"ckpt.safetensors"});
}

// Note [Atomic save] through safetensors::save (core/atomic_file.h; test_atomic_file.cpp
// tests each point on its own): a 0600 file once became 0644, a symlink became a regular
// file, a 250-byte name failed, and a folder fsync failing after the rename threw.
TEST(Safetensors, SaveKeepsTheModeAndTheSymlinkOfTheFileItReplaces) {
  TempFolder folder;
  const fs::path path = folder.path() / "secret.safetensors";
  st::save({{"w", sample({4}, DType::Float32, 1)}}, path.string());
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  fs::create_symlink("secret.safetensors", folder.path() / "latest.safetensors");
  const Tensor saved = sample({4}, DType::Float32, 2);
  st::save({{"w", saved}}, (folder.path() / "latest.safetensors").string());
  EXPECT_TRUE(fs::is_symlink(folder.path() / "latest.safetensors"));
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_TRUE(all_equal(find(st::load(path.string()).tensors, "w"), saved));
  EXPECT_EQ(folder.entries(), (std::vector<std::string>{"latest.safetensors", "secret.safetensors"}));
}

TEST(Safetensors, SavesAFileWithA250ByteName) {
  TempFolder folder;
  const std::string name = std::string(238, 'w') + ".safetensors";
  ASSERT_EQ(name.size(), 250u);
  const Tensor saved = sample({3}, DType::Float32, 1);
  st::save({{"w", saved}}, (folder.path() / name).string());
  EXPECT_TRUE(all_equal(find(st::load((folder.path() / name).string()).tensors, "w"), saved));
  EXPECT_EQ(folder.entries(), std::vector<std::string>{name});
}

TEST(Safetensors, TwoThreadsSavingOnePathBothSucceed) {
  TempFolder folder;
  const fs::path path = folder.path() / "ckpt.safetensors";
  const st::NamedTensors small = {{"w", sample({4}, DType::Float32, 1)}};
  const st::NamedTensors large = {{"w", sample({4096}, DType::Float32, 2)}};
  const std::vector<std::string> errors = testing::errors_of_concurrent_runs(2, [&](int thread) {
    for (int i = 0; i < 20; ++i) st::save(thread == 0 ? small : large, path.string());
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  const int64_t numel = find(st::load(path.string()).tensors, "w").numel();  // a whole file
  EXPECT_TRUE(numel == 4 || numel == 4096) << numel;
  EXPECT_EQ(folder.entries(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST(Safetensors, AFolderFsyncFailureAfterTheRenameIsReportedNotThrown) {
  TempFolder folder;
  const fs::path path = folder.path() / "ckpt.safetensors";
  const Tensor saved = sample({4}, DType::Float32, 1);
  SaveStatus status;
  {
    const ScopedAtomicFileFault fault(AtomicFileStep::SyncFolder, EIO);
    status = st::save({{"w", saved}}, path.string());
  }
  EXPECT_FALSE(status.durable);
  EXPECT_NE(status.warning.find("safetensors: saved " + path.string() + ", but fsync("), std::string::npos)
      << status.warning;
  EXPECT_TRUE(all_equal(find(st::load(path.string()).tensors, "w"), saved));
  EXPECT_TRUE(st::save({{"w", saved}}, path.string()).durable);
}

TEST(Safetensors, SaveHonoursTheUmask) {
  TempFolder folder;
  const fs::path path = folder.path() / "w.safetensors";
  const mode_t previous = ::umask(022);
  st::save({{"w", sample({1}, DType::Float32, 1)}}, path.string());
  ::umask(previous);
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

}  // namespace
}  // namespace kiln
