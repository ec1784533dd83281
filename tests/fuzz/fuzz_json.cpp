// libFuzzer harness for the JSON reader and writer (core/json.h).
//
// Any bytes go to json::parse; a kiln::Error is the expected answer to bad input. What
// parses must be writable and must read back to the same text: dump(parse(x)) is parsed
// again and dumped again, and the two dumps must be equal (the writer never writes what
// the reader refuses, Note [Save and load argument order]'s files depend on it). Anything
// else (another exception, a sanitizer report, a mismatch) stops the fuzzer with the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_json: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::json::Value value;
  try {
    value = kiln::json::parse(text);
  } catch (const kiln::Error&) {
    return 0;  // refused with a message: the expected answer to bad input
  }
  std::string first, second;
  try {
    first = kiln::json::dump(value);
    second = kiln::json::dump(kiln::json::parse(first));
  } catch (const kiln::Error& e) {
    fail("a parsed value did not round-trip", e.what());
  }
  if (first != second) fail("dump(parse(dump(v))) != dump(v)", first + " vs " + second);
  return 0;
}
