// libFuzzer harness for the NPZ reader (data/npz.h) and the zip container under it
// (data/zip.h).
//
// Any bytes are opened as an archive, every array listed from its header and loaded. The
// expected answer to a bad archive is a refusal naming it: the zip reader's ("zip: <fuzz>:
// ...", Note [Zip validation]), the NPY reader's on a member ("npy: <fuzz>/<member>: ...")
// or the NPZ layer's ("npz: <fuzz> ..."). A listed array must load with the shape and
// dtype its header gave; anything else (another exception, a sanitizer report, memory
// beyond what the data inflates to) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/npz.h"
#include "kiln/init.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kHarness = "fuzz_npz";
constexpr std::string_view kSource = "<fuzz>";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialised = (kiln::init(), true);
  (void)initialised;
  try {
    const kiln::data::npz::File file(std::span<const uint8_t>(data, size), kSource);
    for (const kiln::data::npz::Array& array : file.arrays()) {
      const kiln::Tensor t = file.load(array.key);
      if (t.sizes() != array.header.shape || t.dtype() != array.header.dtype) {
        kiln::fuzz::fail(kHarness, "an array differs from its listed header", array.key);
      }
    }
  } catch (const kiln::Error& e) {
    kiln::fuzz::expect_refusal(kHarness, e, {"zip: <fuzz>: ", "npy: <fuzz>/", "npz: <fuzz> "});
  }
  return 0;
}
