// libFuzzer harness for one's own scans' manifests as the trainer reads them
// (train/scans.h over data/scan_list.h): labels to classes or numbers, splits, and the
// checks of every row (the files a fuzzed manifest names do not exist, so each is a
// problem to report).
//
// Any bytes are a manifest. A kiln::Error naming the manifest (or the CSV parser's
// refusal) is the expected answer to a malformed one; otherwise every row must have a
// split and a target or a problem, and every problem must name the manifest.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.h"
#include "kiln/init.h"
#include "tests/fuzz/fuzz_check.h"
#include "train/config.h"
#include "train/scans.h"

namespace {
constexpr const char* kHarness = "fuzz_scan_manifest";

const std::string& manifest_path() {
  static const std::string path = "/tmp/kiln_fuzz_scan_manifest_" + std::to_string(::getpid()) + ".csv";
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialised = (kiln::init(), true);
  (void)initialised;
  const std::string& path = manifest_path();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  kiln::train::TrainConfig config;
  config.dataset = path;
  try {
    const kiln::train::Choices choices = kiln::train::validate(config);
    const kiln::train::OwnScans scans = kiln::train::read_own_scans(config, choices, "");
    if (scans.splits.size() != scans.list.records.size() || scans.targets.size() != scans.list.records.size())
      kiln::fuzz::fail(kHarness, "a row without its split or target", std::to_string(scans.list.records.size()));
    if (!scans.list.records.empty() && scans.problems.empty())
      kiln::fuzz::fail(kHarness, "files that do not exist were not reported", path);
    for (const std::string& problem : scans.problems) {
      if (problem.find(path) == std::string::npos) kiln::fuzz::fail(kHarness, "a problem not naming the manifest", problem);
    }
    (void)kiln::train::format_scan_check(scans);
  } catch (const kiln::Error& e) {
    kiln::fuzz::expect_refusal(kHarness, e, {"CSV '" + path, "scans '" + path, "--task"});
  }
  std::remove(path.c_str());
  return 0;
}
