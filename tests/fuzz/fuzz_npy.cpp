// libFuzzer harness for the NPY reader (data/npy.h).
//
// Any bytes are read as a whole .npy file, header first (read_header_from_bytes), then
// with the array (load_from_bytes); a kiln::Error naming the file is the expected answer
// to a bad file (Note [NPY validation]), and any other is a finding. A header that parses
// must be consistent (the data after it is exactly numel times the stored item size); a
// file that loads must have the header's shape and dtype, and must save and load again to
// the same values (to_bytes writes C order, little-endian, Kiln's dtype).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/ops.h"
#include "data/npy.h"
#include "kiln/init.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kHarness = "fuzz_npy";
constexpr std::string_view kSource = "<fuzz>";

[[noreturn]] void fail(const char* what, const std::string& detail) {
  kiln::fuzz::fail(kHarness, what, detail);
}

void expect_refusal(const kiln::Error& e) {
  kiln::fuzz::expect_refusal(kHarness, e, "npy: " + std::string(kSource) + ": ");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialised = (kiln::init(), true);
  (void)initialised;
  const std::span<const uint8_t> bytes(data, size);
  kiln::data::npy::Header header;
  try {
    header = kiln::data::npy::read_header_from_bytes(bytes, kSource);
  } catch (const kiln::Error& e) {
    expect_refusal(e);
    return 0;
  }
  if (header.data_offset + header.data_bytes() != static_cast<int64_t>(size)) {
    fail("a header that does not account for the file's bytes", header.descr);
  }
  kiln::Tensor loaded;
  try {
    loaded = kiln::data::npy::load_from_bytes(bytes, kSource);
  } catch (const kiln::Error& e) {
    expect_refusal(e);
    return 0;  // e.g. a bool byte other than 0 and 1
  }
  if (loaded.sizes() != header.shape || loaded.dtype() != header.dtype) {
    fail("the loaded tensor differs from its header", header.descr);
  }
  try {
    const std::string saved = kiln::data::npy::to_bytes(loaded);
    const kiln::Tensor again = kiln::data::npy::load_from_bytes(
        std::span(reinterpret_cast<const uint8_t*>(saved.data()), saved.size()), kSource);
    if (!kiln::fuzz::same_bytes(again, loaded)) fail("save + load changed the array", header.descr);
  } catch (const kiln::Error& e) {
    fail("a loaded array could not be saved and loaded again", e.what());
  }
  return 0;
}
