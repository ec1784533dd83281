// libFuzzer harness for PyTorch checkpoints (data/pth.h): the zip and legacy containers,
// the restricted unpickler under them (data/pickle.h) and the storages-to-tensors step.
//
// Any bytes are loaded as a checkpoint. The expected answer to a bad one is a refusal
// naming it (the checkpoint reader's "<fuzz>: ...", or the zip reader's "zip: <fuzz>: ").
// A checkpoint that loads must give contiguous CPU tensors whose element count matches
// their sizes, and a state dict that is a part of them; anything else (another exception,
// a sanitizer report, a hang, memory beyond the limit for a small input) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/pth.h"
#include "kiln/init.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kHarness = "fuzz_pth";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialised = (kiln::init(), true);
  (void)initialised;
  try {
    const kiln::data::pth::Checkpoint checkpoint =
        kiln::data::pth::load_from_bytes(std::span<const uint8_t>(data, size), "<fuzz>");
    for (const auto& [name, t] : checkpoint.tensors) {
      int64_t numel = 1;
      for (int64_t s : t.sizes()) numel *= s;
      if (!t.is_contiguous() || t.numel() != numel || !t.device().is_cpu()) {
        kiln::fuzz::fail(kHarness, "a loaded tensor that is not a contiguous CPU tensor of its sizes", name);
      }
    }
    if (kiln::data::pth::state_dict(checkpoint).size() > checkpoint.tensors.size()) {
      kiln::fuzz::fail(kHarness, "a state dict larger than the checkpoint", "");
    }
  } catch (const kiln::Error& e) {
    kiln::fuzz::expect_refusal(kHarness, e, {"<fuzz>", "zip: <fuzz>: "});
  }
  return 0;
}
