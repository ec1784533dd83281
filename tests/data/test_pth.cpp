// PyTorch checkpoints (data/pth.h) through the restricted unpickler (data/pickle.h):
// files torch.save wrote (tests/data/pth/make_fixtures.py, torch 2.15) in the zip and the
// legacy format load every storage dtype, strided, offset and shared views, parameters,
// empty and 0-d tensors, nested dicts, lists and tuples, as PyTorch wrote them; a legacy
// file saved from a GPU (MedicalNet's kind) loads on the CPU. Hostile files are refused
// by name: torch.save'd objects whose __reduce__ calls os.system or eval, and hand-made
// pickles: unknown globals, object-building opcodes, truncation everywhere, lying storage
// sizes, views outside their storage, nesting and shared-reference bombs, self-references,
// bad memo reads, stack underflow, non-string keys; legacy files with a wrong magic
// number, a lying element count or missing data.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/safetensors.h"
#include "data/pth.h"
#include "data/zip.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace pth = data::pth;

std::string fixture(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/tests/data/pth/" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::span<const uint8_t> span_of(const std::string& bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

// A literal's bytes, zeros included.
template <size_t N>
std::string bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::string other(const pth::Checkpoint& c, const std::string& path) {
  for (const auto& [p, text] : c.others) {
    if (p == path) return text;
  }
  return "<missing " + path + ">";
}

TEST(Pth, BothFormatsLoadWhatPyTorchWrote) {
  const safetensors::Loaded expected = safetensors::load(fixture("expected.safetensors"));
  for (const char* file : {"checkpoint_zip.pth", "checkpoint_legacy.pth"}) {
    SCOPED_TRACE(file);
    const pth::Checkpoint c = pth::load(fixture(file));
    EXPECT_EQ(c.format, std::string(file).find("zip") != std::string::npos ? "zip" : "legacy");
    std::map<std::string, Tensor> got(c.tensors.begin(), c.tensors.end());
    ASSERT_EQ(got.size(), expected.tensors.size());
    for (const auto& [name, want] : expected.tensors) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(got.contains(name));
      EXPECT_EQ(got[name].dtype(), want.dtype());
      EXPECT_TRUE(testing::all_equal(got[name], want));
      EXPECT_TRUE(got[name].is_contiguous());
    }
    EXPECT_EQ(got["state_dict.transposed"].sizes(), (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(got["state_dict.scalar"].dim(), 0);
    EXPECT_EQ(other(c, "epoch"), "7");
    EXPECT_EQ(other(c, "best_acc"), "0.91");
    EXPECT_EQ(other(c, "arch"), "'resnet'");
    EXPECT_EQ(other(c, "betas.1"), "0.999");
    EXPECT_EQ(other(c, "flags.0"), "True");
    EXPECT_EQ(other(c, "flags.1"), "None");
    EXPECT_EQ(other(c, "optimizer.state.0.step"), "3");
    EXPECT_EQ(other(c, "optimizer.param_groups.0.params.1"), "1");
    EXPECT_EQ(other(c, "optimizer.param_groups.0.amsgrad"), "False");
    std::string under;
    const safetensors::NamedTensors weights = pth::state_dict(c, &under);
    EXPECT_EQ(under, "state_dict");
    EXPECT_EQ(weights.size(), 17u);
    EXPECT_EQ(weights.front().first, "f32");
  }
}

TEST(Pth, ALegacyCheckpointSavedFromAGpuLoadsOnTheCpu) {
  const pth::Checkpoint c = pth::load(fixture("medicalnet_style.pth"));
  EXPECT_EQ(c.format, "legacy");
  const safetensors::NamedTensors weights = pth::state_dict(c);
  ASSERT_FALSE(weights.empty());
  EXPECT_EQ(weights.front().first, "module.conv1.weight");
  EXPECT_EQ(weights.front().second.sizes(), (std::vector<int64_t>{4, 1, 7, 7, 7}));
  EXPECT_EQ(weights.front().second.device(), Device::cpu());
}

TEST(Pth, MaliciousCheckpointsAreRefusedBeforeAnythingRuns) {
  EXPECT_KILN_ERROR(pth::load(fixture("hostile_os_system.pth")), "hostile_os_system.pth", "refused global",
                    "system", "may try to run code");
  // (Python 3 pickles builtins.eval under protocol 2 as __builtin__.eval.)
  EXPECT_KILN_ERROR(pth::load(fixture("hostile_eval_legacy.pth")), "refused global __builtin__.eval");
}

// ---- hand-made pickles ------------------------------------------------------------------

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}
std::string unicode(const std::string& text) { return "X" + le32(static_cast<uint32_t>(text.size())) + text; }
std::string binint(int32_t v) { return "J" + le32(static_cast<uint32_t>(v)); }
std::string ints(const std::vector<int32_t>& values) {
  std::string s = "(";
  for (int32_t v : values) s += binint(v);
  return s + "t";
}

// {'w': a float32 tensor of storage '0' (numel elements), offset, sizes, strides}.
std::string tensor_pickle(int32_t numel, int32_t offset, const std::vector<int32_t>& sizes,
                          const std::vector<int32_t>& strides) {
  return std::string("\x80\x02}") + unicode("w") + "ctorch._utils\n_rebuild_tensor_v2\n((" +
         unicode("storage") + "ctorch\nFloatStorage\n" + unicode("0") + unicode("cpu") + binint(numel) +
         "tQ" + binint(offset) + ints(sizes) + ints(strides) + "\x89}tRs.";
}

pth::Checkpoint load_zip(const std::string& pickle, const std::string& storage) {
  const std::string bytes = data::zip::write_archive({{"a/data.pkl", pickle}, {"a/data/0", storage}}, false);
  return pth::load_from_bytes(span_of(bytes), "made.pth");
}

std::string floats(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const float v = static_cast<float>(i);
    s.append(reinterpret_cast<const char*>(&v), 4);
  }
  return s;
}

TEST(Pth, HandMadeTensorsLoadAndLyingOnesAreRefused) {
  const pth::Checkpoint c = load_zip(tensor_pickle(6, 1, {2, 2}, {1, 2}), floats(6));
  ASSERT_EQ(c.tensors.size(), 1u);
  EXPECT_TRUE(testing::all_equal(c.tensors[0].second, tensor(std::vector<float>{1, 3, 2, 4}, {2, 2})));
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, 0, {2, 3}, {3, 1}), floats(5)), "made.pth",
                    "storage 0 holds 20 bytes", "need 24");
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, 2, {2, 3}, {3, 1}), floats(6)), "tensor 'w'",
                    "reaches element 7", "has 6 elements");
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, 0, {-1}, {1}), floats(6)), "negative");
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, 0, {2}, {-1}), floats(6)), "negative");
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, -1, {2}, {1}), floats(6)), "negative offset");
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, 0, {1 << 30, 1 << 30, 1 << 30}, {1, 1, 1}), floats(6)),
                    "overflows");
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, 0, {2, 2}, {1}), floats(6)), "more sizes than strides");
  const std::string no_storage =
      data::zip::write_archive({{"a/data.pkl", tensor_pickle(6, 0, {6}, {1})}}, false);
  EXPECT_KILN_ERROR(pth::load_from_bytes(span_of(no_storage), "made.pth"), "storage 0",
                    "has no member a/data/0");
  const std::string no_pickle = data::zip::write_archive({{"a/other", "x"}}, false);
  EXPECT_KILN_ERROR(pth::load_from_bytes(span_of(no_pickle), "made.pth"), "without <folder>/data.pkl");
  std::string unknown_type = tensor_pickle(6, 0, {6}, {1});
  unknown_type.replace(unknown_type.find("FloatStorage"), 12, "QUIntStorage");
  EXPECT_KILN_ERROR(load_zip(unknown_type, floats(6)), "refused global torch.QUIntStorage");
}

// Each tensor loads as its own copy, so a small file may not make the reader allocate
// without bound: an expanded view (stride 0), one storage referenced again and again
// through the memo, and a pickle that builds the same large value again and again are
// refused.
TEST(Pth, CopiesAndValuesMayNotOutgrowTheFile) {
  EXPECT_KILN_ERROR(load_zip(tensor_pickle(6, 0, {1 << 20}, {0}), floats(6)), "made.pth", "tensor 'w'",
                    "more than its storage's 6", "expanded view");
  // A 4 MiB storage referenced 31 times: 124 MiB of copies from a 4 MiB file.
  std::string pickle = tensor_pickle(1 << 20, 0, {1 << 20}, {1});
  pickle.replace(pickle.find("tRs."), 4,
                 bytes("tRq\x00"
                       "s"));  // memoize the tensor; no STOP yet
  pickle += "(";
  for (int i = 0; i < 30; ++i) pickle += unicode("copy" + std::to_string(i)) + bytes("h\x00");
  pickle += "u.";
  EXPECT_KILN_ERROR(load_zip(pickle, floats(1 << 20)),
                    "its 31 tensors would copy 130023424 bytes out of a file of");
  // OrderedDict(list of 200000 pairs) called again and again on one memoized list.
  std::string bomb = bytes("\x80\x02K\x01K\x02\x86q\x00](");  // the pair (1, 2), then a list of it
  for (int i = 0; i < 200000; ++i) bomb += bytes("h\x00");
  bomb += bytes("eq\x01\x63\x63ollections\nOrderedDict\nq\x02");
  for (int i = 0; i < 100; ++i) bomb += bytes("h\x02h\x01\x85R0");  // OrderedDict((list,)); POP
  bomb += "N.";
  EXPECT_KILN_ERROR(load_zip(bomb, ""), "made.pth", "builds more than", "bytes of values");
}

// The weights are a real top-level entry, never a prefix of a flattened key: a plain
// state dict whose module has children named `model` and `head` is all weights.
TEST(Pth, StateDictIsATopLevelEntryNotAKeyPrefix) {
  std::string pickle = tensor_pickle(6, 0, {6}, {1});
  pickle.replace(pickle.find(unicode("w")), unicode("w").size(), unicode("model.weight"));
  pickle.replace(pickle.find("tRs."), 4,
                 bytes("tRq\x00"
                       "s"));
  pickle += unicode("head.weight") + bytes(
                                         "h\x00"
                                         "s.");
  const pth::Checkpoint c = load_zip(pickle, floats(6));
  std::string under = "?";
  const safetensors::NamedTensors weights = pth::state_dict(c, &under);
  EXPECT_EQ(under, "");
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_EQ(weights[0].first, "model.weight");
  EXPECT_EQ(weights[1].first, "head.weight");
}

TEST(Pth, KeysAndTextsAreBounded) {
  std::string long_key = tensor_pickle(6, 0, {6}, {1});
  long_key.replace(long_key.find(unicode("w")), unicode("w").size(), unicode(std::string(5000, 'k')));
  EXPECT_KILN_ERROR(load_zip(long_key, floats(6)), "a key of 5000 bytes");
  const std::string text = bytes("\x80\x02}") + unicode("note") + unicode(std::string(1000, 'x')) + "s.";
  const pth::Checkpoint c = load_zip(text, "");
  ASSERT_EQ(c.others.size(), 1u);
  EXPECT_EQ(c.others[0].second.size(), 256u + std::string("... (1002 bytes)").size());
  EXPECT_TRUE(c.others[0].second.ends_with("... (1002 bytes)"));
}

TEST(Pth, FilesOfAnotherKindAreNotCheckpoints) {
  for (const std::string& content :
       {std::string("hello, world\n"), std::string("\x93NUMPY", 6), std::string("{}")}) {
    EXPECT_KILN_ERROR(pth::load_from_bytes(span_of(content), "other.bin"), "other.bin",
                      "not a PyTorch checkpoint");
  }
}

TEST(Pth, EveryTruncationOfAPickleIsAnError) {
  const std::string pickle = tensor_pickle(6, 0, {6}, {1});
  for (size_t n = 0; n + 1 < pickle.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THROW(load_zip(pickle.substr(0, n), floats(6)), Error);
  }
  const std::string legacy = read_bytes(fixture("checkpoint_legacy.pth"));
  for (size_t n = 0; n < legacy.size(); n += 7) {
    SCOPED_TRACE(n);
    EXPECT_THROW(pth::load_from_bytes(span_of(legacy.substr(0, n)), "cut.pth"), Error);
  }
}

TEST(Pth, HostilePicklesAreRefused) {
  const auto refuse = [](const std::string& pickle, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_KILN_ERROR(load_zip(pickle, ""), "made.pth", what);
  };
  const std::string proto = bytes("\x80\x02");
  refuse(proto + "cos\nsystem\n)R.", "refused global os.system");
  refuse(proto + "c__builtin__\neval\n)R.", "refused global __builtin__.eval");
  refuse(proto + unicode("os") + unicode("system") + bytes("\x93") + ")R.", "refused global os.system");
  refuse(proto + "ccollections\nOrderedDict\n)" + bytes("\x81") + ".", "NEWOBJ");
  refuse(proto + "(ccollections\nOrderedDict\no.", "OBJ");
  refuse(proto + "I1\n.", "unsupported opcode 0x49");
  refuse(bytes("\x80\x09") + ".", "pickle protocol 9");
  refuse(proto + bytes("h\x05") + ".", "memo entry 5 read before it was written");
  refuse(proto + "a.", "stack is empty");
  refuse(proto + ".", "STOP with an empty stack");
  refuse(proto + bytes("}(K\x01u."), "odd number");
  refuse(proto + bytes(")K\x01"
                       "a."),
         "APPEND(S) on a tuple");
  refuse(proto + bytes("X\xff\xff\xff\x7f."), "runs past the stream's end");
  refuse(proto + bytes("\x8b\xff\xff\xff\x7f."), "runs past the stream's end");
  refuse(proto + bytes("K\x01)R."), "REDUCE calls a int");
  refuse(proto + bytes("}G\x3f\xf0\x00\x00\x00\x00\x00\x00K\x01s."), "float key");
  refuse(proto + bytes("(K\x01K\x02tQ."), "persistent id that is not ('storage'");
  // A list holding itself: the walk stops at its depth limit.
  refuse(proto + bytes("]q\x00h\x00"
                       "a."),
         "nests deeper than 200 levels");
  // 400 nested lists.
  std::string deep = proto;
  for (int i = 0; i < 400; ++i) deep += "]";
  for (int i = 0; i < 399; ++i) deep += "a";
  refuse(deep + ".", "nests deeper");
  // A "billion laughs" of shared references: level k is ten references to level k - 1.
  std::string laughs = proto + bytes("]q\x00");
  for (int level = 1; level <= 7; ++level) {
    laughs += "](";
    for (int i = 0; i < 10; ++i) {
      laughs.push_back('h');  // BINGET level - 1
      laughs.push_back(static_cast<char>(level - 1));
    }
    laughs.append("eq");  // APPENDS, BINPUT level
    laughs.push_back(static_cast<char>(level));
  }
  refuse(laughs + ".", "reference bomb");
}

// A legacy file made by hand: magic, version 1001, system info, {'w': tensor} (with the
// legacy persistent id's view slot), the storage keys, then each storage's count and data.
std::string legacy_file(const std::string& view, const std::string& keys, int64_t count,
                        const std::string& data) {
  std::string magic = "\x80\x02\x8a\x0a";
  for (uint8_t b : {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19})
    magic.push_back(static_cast<char>(b));
  std::string object = tensor_pickle(6, 0, {2}, {1});
  object.replace(object.find("tQ"), 2, view + "tQ");
  std::string count_bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    count_bytes[static_cast<size_t>(i)] = static_cast<char>((count >> (8 * i)) & 0xFF);
  return magic + "." + "\x80\x02M\xe9\x03." + "\x80\x02}(" + unicode("little_endian") + "\x88u." + object +
         "\x80\x02](" + keys + "e." + count_bytes + data;
}

TEST(Pth, HandMadeLegacyFilesLoadAndBrokenOnesAreRefused) {
  const auto load = [](const std::string& bytes) { return pth::load_from_bytes(span_of(bytes), "old.pth"); };
  const pth::Checkpoint c = load(legacy_file("N", unicode("0"), 6, floats(6)));
  EXPECT_EQ(c.format, "legacy");
  EXPECT_TRUE(testing::all_equal(c.tensors.at(0).second, tensor(std::vector<float>{0, 1})));
  // A view of elements [3, 6) of storage 0: the tensor reads from its start.
  const std::string view = "(" + unicode("0") + binint(3) + binint(3) + "t";
  EXPECT_TRUE(testing::all_equal(load(legacy_file(view, unicode("0"), 6, floats(6))).tensors.at(0).second,
                                 tensor(std::vector<float>{3, 4})));
  const std::string outside = "(" + unicode("0") + binint(5) + binint(3) + "t";
  EXPECT_KILN_ERROR(load(legacy_file(outside, unicode("0"), 6, floats(6))), "old.pth",
                    "lies outside its storage");
  EXPECT_KILN_ERROR(load(legacy_file("N", unicode("0"), 5, floats(6))), "holds 5 elements",
                    "the pickle declared 6");
  EXPECT_KILN_ERROR(load(legacy_file("N", unicode("0"), 6, floats(5))), "ends inside storage 0");
  EXPECT_KILN_ERROR(load(legacy_file("N", unicode("1"), 6, floats(6))), "storage 1 is listed but never used");
  EXPECT_KILN_ERROR(load(legacy_file("N", "", 6, floats(6))),
                    "storage 0 is used but its data is not in the file");
  EXPECT_KILN_ERROR(load(legacy_file("N", unicode("0") + unicode("0"), 6, floats(6))), "listed twice");
  std::string wrong_magic = legacy_file("N", unicode("0"), 6, floats(6));
  wrong_magic[5] ^= 0x01;
  EXPECT_KILN_ERROR(load(wrong_magic), "not a PyTorch checkpoint");
  EXPECT_KILN_ERROR(load(std::string()), "old.pth");
}

TEST(Pth, MissingFilesAreErrorsNamingThem) {
  EXPECT_KILN_ERROR(pth::load("/nonexistent/weights.pth"), "/nonexistent/weights.pth");
}

// A large file that is no checkpoint is refused from its first bytes, not read whole first:
// a sparse terabyte of zeros (reading it would allocate a terabyte and fail otherwise).
TEST(Pth, ALargeFileOfAnotherKindIsRefusedWithoutReadingIt) {
  testing::TempFolder folder;
  const std::string path = folder.file("huge.pth");
  std::ofstream(path).close();
  std::filesystem::resize_file(path, uint64_t{1} << 40);
  EXPECT_KILN_ERROR(pth::load(path), path, "not a PyTorch checkpoint");
  // A protocol past 5 is no pickle PyTorch writes.
  std::ofstream(path, std::ios::binary) << std::string("\x80\x09\x8a\x0a", 4);
  EXPECT_KILN_ERROR(pth::load(path), "not a PyTorch checkpoint");
}

}  // namespace
}  // namespace kiln
