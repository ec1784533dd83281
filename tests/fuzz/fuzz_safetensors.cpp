// libFuzzer harness for the safetensors reader (core/safetensors.h).
//
// Any bytes are read as a whole file, header first (read_header_from_bytes) and then with
// the tensors (load_from_bytes); a kiln::Error naming the file is the expected answer to a
// bad file (Note [safetensors validation]), and any other is a finding: a failed
// KILN_ASSERT, such as a json::Reader call out of turn, is a Kiln bug. A file that loads
// must describe itself consistently (each tensor's bytes are its elements times the item
// size) and must save and load again to the same tensors. Anything else (another
// exception, a sanitizer report, a mismatch) stops the fuzzer with the input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"
#include "kiln/init.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kHarness = "fuzz_safetensors";

[[noreturn]] void fail(const char* what, const std::string& detail) { kiln::fuzz::fail(kHarness, what, detail); }

// The name the harness gives its input.
constexpr std::string_view kSource = "<fuzz>";

// A bad file is refused in the reader's words, naming the file; anything else is a bug.
void expect_refusal(const kiln::Error& e) {
  kiln::fuzz::expect_refusal(kHarness, e, "safetensors: " + std::string(kSource) + ": ");
}

// Saving writes the tensors in Python's order (Note [safetensors write order]), which need
// not be the file's, and loading returns them in file order: compare by name.
void check_round_trip(const kiln::safetensors::Loaded& loaded) {
  const std::vector<uint8_t> saved = kiln::safetensors::save_to_bytes(loaded.tensors, loaded.metadata);
  const kiln::safetensors::Loaded again = kiln::safetensors::load_from_bytes(saved);
  if (again.tensors.size() != loaded.tensors.size() || again.metadata != loaded.metadata) {
    fail("save + load changed the file", "tensor count or metadata");
  }
  std::map<std::string, const kiln::Tensor*> by_name;
  for (const auto& [name, tensor] : again.tensors) by_name[name] = &tensor;
  for (const auto& [name, tensor] : loaded.tensors) {
    const auto found = by_name.find(name);
    if (found == by_name.end() || !kiln::fuzz::same_bytes(*found->second, tensor)) {
      fail("save + load changed a tensor", name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialised = (kiln::init(), true);
  (void)initialised;
  const std::span<const uint8_t> bytes(data, size);
  kiln::safetensors::Header header;
  try {
    header = kiln::safetensors::read_header_from_bytes(bytes, kSource);
  } catch (const kiln::Error& e) {
    expect_refusal(e);
    return 0;
  }
  for (const kiln::safetensors::TensorInfo& info : header.tensors) {
    const auto dtype = kiln::safetensors::to_kiln_dtype(info.dtype);
    if (dtype && info.nbytes() != info.numel() * static_cast<int64_t>(kiln::itemsize(*dtype))) {
      fail("a tensor's byte range does not match its shape", info.name);
    }
  }
  kiln::safetensors::Loaded loaded;
  try {
    loaded = kiln::safetensors::load_from_bytes(bytes, kiln::Device::cpu(), kSource);
  } catch (const kiln::Error& e) {
    expect_refusal(e);
    return 0;  // e.g. a valid header with a dtype Kiln does not hold
  }
  try {
    check_round_trip(loaded);
  } catch (const kiln::Error& e) {
    fail("a loaded file could not be saved and loaded again", e.what());
  }
  return 0;
}
