// libFuzzer harness for the JSON reader and writer (core/json.h, core/json_reader.h).
//
// Any bytes go to json::parse; a json::ParseError is the expected answer to bad input
// (every problem with the text is one), and any other kiln::Error is a finding: a failed
// KILN_ASSERT, such as a json::Reader call out of turn, is a Kiln bug. The reader's
// skip_value() must agree with parse(): it checks what it skips as thoroughly as reading
// it, so it accepts the same texts and refuses the others in the same words. What parses
// must be writable and must read back to the same text: dump(parse(x)) is parsed again
// and dumped again, and the two dumps must be equal (the writer never writes what the
// reader refuses; the files Kiln saves depend on it). Anything else (another exception, a
// sanitizer report, a mismatch) stops the fuzzer with the input.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kHarness = "fuzz_json";

[[noreturn]] void fail(const char* what, const std::string& detail) { kiln::fuzz::fail(kHarness, what, detail); }

// How `read`, reading the input, answers it: nullopt when it accepts it, the message of
// its ParseError when it refuses it. Any other error is a Kiln bug.
template <typename Read>
std::optional<std::string> refusal(const Read& read) {
  try {
    read();
    return std::nullopt;
  } catch (const kiln::json::ParseError& e) {
    return e.what();
  } catch (const kiln::Error& e) {
    fail("an error that is not a json::ParseError", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::json::Value value;
  const std::optional<std::string> parse_error = refusal([&] { value = kiln::json::parse(text); });
  const std::optional<std::string> skip_error = refusal([&] {
    kiln::json::Reader reader(text);
    reader.skip_value();
    reader.finish();
  });
  if (skip_error != parse_error) {
    fail("skip_value and parse disagree",
         "parse: " + parse_error.value_or("accepted") + "; skip_value: " + skip_error.value_or("accepted"));
  }
  if (parse_error) return 0;  // refused with a message: the expected answer to bad input
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
