// Throttle: "at most once per interval", for everything Kiln does periodically (drawing
// the progress line, saving a log file). The first question is always answered yes.
//
//   Throttle redraw(std::chrono::milliseconds(100));
//   if (redraw.due()) draw();            // the first call draws; then at most every 100 ms
//
// Note [Never, not the clock's zero]: the last time a throttle said yes starts as "never"
// (an empty optional), not as a default std::chrono::steady_clock::time_point. steady_clock
// counts from the machine's boot on Linux, so its zero is only minutes ago on a freshly
// booted machine: a throttle starting from it withholds its first event until the clock
// passes the interval (a progress bar printing every 30 s said nothing for the first
// half-minute after boot, and a one-hour interval swallowed the first line of a test on
// every machine up for less than an hour). tests/clock/ runs the suites that throttle
// with the monotonic clock at a few seconds and at forty days, in a time namespace.
#pragma once

#include <chrono>
#include <optional>

namespace kiln {

class Throttle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Throttle(Clock::duration interval) : interval_(interval) {}

  // Whether an event is due at `now`: the first call, or `interval` since the last yes
  // (a yes counts as the last event from then on).
  bool due(Clock::time_point now = Clock::now()) {
    if (last_ && now - *last_ < interval_) return false;
    last_ = now;
    return true;
  }
  // An event happened at `now` without asking (a forced save): the interval restarts.
  void mark(Clock::time_point now = Clock::now()) { last_ = now; }
  Clock::duration interval() const { return interval_; }

 private:
  Clock::duration interval_;
  std::optional<Clock::time_point> last_;  // Note [Never, not the clock's zero]
};

}  // namespace kiln
