// libFuzzer harness for the NIfTI reader (data/nifti.h).
//
// nifti_clib reads files, not memory, so each input is written to a file of this process
// (named .nii.gz when it starts with gzip's magic, else .nii) and read three ways: the
// header alone, the volume as float32, the volume kept as stored and reoriented to RAS+.
// A kiln::Error naming the file is the expected answer to a bad file (Note [NIfTI
// validation]); anything else (a crash, an abort, a huge allocation the sanitizers catch,
// another error) is a finding. A volume that loads must have the header's dims.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/nifti.h"
#include "kiln/init.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kHarness = "fuzz_nifti";

std::string input_path(bool gzip) {
  return "/tmp/kiln_fuzz_nifti_" + std::to_string(::getpid()) + (gzip ? ".nii.gz" : ".nii");
}

// The shape a volume with these header dims loads as: [C, X, Y, Z].
std::vector<int64_t> volume_shape(const std::vector<int64_t>& dims) {
  return {dims.size() > 3 ? dims[3] : 1, dims[0], dims[1], dims[2]};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialised = (kiln::init(), true);
  (void)initialised;
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const std::string path = input_path(gzip);
  struct RemovedAtReturn {  // so no input outlives its run in /tmp
    const std::string& path;
    ~RemovedAtReturn() { std::remove(path.c_str()); }
  } const removed{path};
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  const std::string prefix = "NIfTI file '" + path + "': ";
  kiln::data::nifti::Header header;
  try {
    header = kiln::data::nifti::read_header(path);
  } catch (const kiln::Error& e) {
    kiln::fuzz::expect_refusal(kHarness, e, prefix);
    return 0;
  }
  try {
    const kiln::data::nifti::Volume volume = kiln::data::nifti::read(path);
    if (volume.data.sizes() != volume_shape(header.dims) || volume.data.dtype() != kiln::DType::Float32) {
      kiln::fuzz::fail(kHarness, "the volume differs from its header", header.datatype);
    }
    const kiln::data::nifti::Volume kept = kiln::data::nifti::read(path, {.keep_dtype = true, .reorient_to_ras = true});
    if (kept.data.numel() != volume.data.numel() || kept.header.orientation != "RAS") {
      kiln::fuzz::fail(kHarness, "the reoriented volume lost voxels or is not RAS", kept.header.orientation);
    }
  } catch (const kiln::Error& e) {
    kiln::fuzz::expect_refusal(kHarness, e, prefix);  // e.g. voxel data shorter than claimed
  }
  return 0;
}
