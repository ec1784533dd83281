// Runs a fuzz harness's LLVMFuzzerTestOneInput over files, without libFuzzer: the ctest
// entries fuzz.<name>.replay run every harness over its seed corpus and every input that
// ever made it fail (tests/fuzz/regressions/<name>/), in every build, and under ASan and
// UBSan in `make sanitize`. Arguments are files or folders (every file inside, sorted, so
// runs are repeatable); a folder's README.md is skipped. Exit status 0 when every input
// ran; an input that makes the harness fail aborts with the harness's message.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> inputs_of(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(path)) {
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::filesystem::exists(argv[i])) {
      std::fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      return 1;
    }
    for (const std::filesystem::path& file : inputs_of(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++ran;
    }
  }
  std::printf("replay: %lld inputs ran\n", static_cast<long long>(ran));
  return ran > 0 ? 0 : 1;  // an empty corpus means the paths are wrong
}
