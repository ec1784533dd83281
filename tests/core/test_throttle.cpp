// Throttle (core/throttle.h): the first event is due whatever the clock reads, the clock's
// zero included (a machine just booted), then one per interval; mark() restarts it.
#include <gtest/gtest.h>

#include "core/throttle.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using Clock = Throttle::Clock;

TEST(Throttle, TheFirstEventIsDueEvenAtTheClocksZero) {
  const Clock::time_point boot{};  // what steady_clock reads at boot on Linux
  Throttle hourly(1h);
  EXPECT_TRUE(hourly.due(boot + 3s));
  EXPECT_FALSE(hourly.due(boot + 4s));
  EXPECT_FALSE(hourly.due(boot + 3s + 59min));
  EXPECT_TRUE(hourly.due(boot + 3s + 1h));
  EXPECT_FALSE(hourly.due(boot + 3s + 1h + 1ms));
}

TEST(Throttle, MarkRestartsTheInterval) {
  const Clock::time_point t0 = Clock::time_point{} + 40 * 24h;  // a machine up for forty days
  Throttle every_second(1s);
  every_second.mark(t0);
  EXPECT_FALSE(every_second.due(t0 + 999ms));
  EXPECT_TRUE(every_second.due(t0 + 1s));
  every_second.mark(t0 + 1500ms);
  EXPECT_FALSE(every_second.due(t0 + 2s));
  EXPECT_TRUE(every_second.due(t0 + 2500ms));
  EXPECT_EQ(every_second.interval(), Clock::duration(1s));
}

}  // namespace
}  // namespace kiln
