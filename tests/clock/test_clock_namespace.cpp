// The clock a test run sees: under tests/clock/run_at_clock.sh (KILN_EXPECT_MONOTONIC_S
// set), steady_clock reads what the script asked for, so the suites it runs are really
// tested at that uptime; elsewhere there is nothing to check and the test says so.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace kiln {
namespace {

TEST(ClockNamespace, TheClockReadsWhatTheScriptSet) {
  const char* expected = std::getenv("KILN_EXPECT_MONOTONIC_S");
  if (expected == nullptr) GTEST_SKIP() << "not run by tests/clock/run_at_clock.sh";
  const double now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const double target = std::stod(expected);
  // The script read the uptime a moment before exec; the test runs first in its binary.
  EXPECT_GE(now, target - 2) << "steady_clock reads " << now << " s";
  EXPECT_LT(now, target + 30) << "steady_clock reads " << now << " s";
}

}  // namespace
}  // namespace kiln
