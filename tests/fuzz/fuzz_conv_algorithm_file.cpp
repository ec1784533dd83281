// libFuzzer harness for the cuDNN algorithm-cache file reader (read_algorithm_bytes in
// kernels/cuda/cudnn/conv_algorithm_file.h: host C++, built in every configuration).
//
// Any bytes are read as a file for one GPU and cuDNN version (the seeds are for them);
// the reader's refusal, a kiln::Error naming the input, is the expected answer to a
// malformed file (any other error is a Kiln bug). A file that loads must leave
// the cache holding only what the algorithm rules allow (Note [Usable algorithms]): every
// cached algorithm usable for its key and kept as it runs, and no more entries than the
// report counts. Anything else (another exception, a sanitizer report, a broken rule)
// stops the fuzzer with the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"
#include "kernels/cuda/cudnn/conv_algorithm_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kHarness = "fuzz_conv_algorithm_file";

[[noreturn]] void fail(const char* what, const std::string& detail) { kiln::fuzz::fail(kHarness, what, detail); }

void check_cache(const kiln::cuda::ConvAlgorithmCache& cache, const kiln::cudnn::LoadReport& report) {
  if (static_cast<int64_t>(cache.size()) > report.entries) fail("more entries cached than loaded", "");
  for (const auto& [key, entry] : cache.entries()) {
    for (const kiln::cuda::ConvAlgorithm& algorithm : entry.ranking) {
      if (const char* why = kiln::cuda::why_unusable(key, algorithm, SIZE_MAX)) fail("a loaded algorithm breaks a rule", why);
      if (!(kiln::cuda::run_as(key, algorithm) == algorithm)) fail("a loaded algorithm is not kept as it runs", "");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kiln::cuda::AlgorithmCacheIdentity identity{.gpu = "NVIDIA H200", .cudnn_version = 91900};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::cuda::ConvAlgorithmCache cache;
  kiln::cudnn::LoadReport report;
  try {
    report = kiln::cuda::read_algorithm_bytes(cache, text, identity, "<fuzz>");
  } catch (const kiln::Error& e) {
    kiln::fuzz::expect_refusal(kHarness, e, "load_algorithm_cache: <fuzz>");
    if (cache.size() != 0) fail("a refused file left entries in the cache", "");
    return 0;
  }
  check_cache(cache, report);
  return 0;
}
