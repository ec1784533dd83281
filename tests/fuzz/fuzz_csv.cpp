// libFuzzer harness for the CSV parser of dataset manifests (data/csv.h).
//
// Any bytes are parsed as a CSV table; a kiln::Error naming the input is the expected
// answer to a malformed one. A table that parses must be rectangular (every row as wide
// as the header), with unique, non-empty column names and rows on increasing lines.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/csv.h"
#include "tests/fuzz/fuzz_check.h"

namespace {
constexpr const char* kHarness = "fuzz_csv";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::data::CsvTable table;
  try {
    table = kiln::data::parse_csv(text, "<fuzz>");
  } catch (const kiln::Error& e) {
    kiln::fuzz::expect_refusal(kHarness, e, "CSV '<fuzz>': ");
    return 0;
  }
  const std::set<std::string> names(table.columns.begin(), table.columns.end());
  if (names.size() != table.columns.size() || names.count("") != 0) {
    kiln::fuzz::fail(kHarness, "duplicate or empty column names", std::to_string(table.columns.size()));
  }
  if (table.lines.size() != table.rows.size()) kiln::fuzz::fail(kHarness, "a row without its line", "");
  for (size_t r = 0; r < table.rows.size(); ++r) {
    if (table.rows[r].size() != table.columns.size()) {
      kiln::fuzz::fail(kHarness, "a row of another width than the header", std::to_string(r));
    }
    if (table.lines[r] < 2 || (r > 0 && table.lines[r] <= table.lines[r - 1])) {
      kiln::fuzz::fail(kHarness, "rows not on increasing lines after the header", std::to_string(r));
    }
  }
  return 0;
}
