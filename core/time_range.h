// TimeRange and Timeline: where the time goes, as named, scoped ranges recorded per thread
// (the trainer's bottleneck report is built on them; a trace exporter would read the same
// records); and Stopwatch, the clock they read. This is Kiln's one timing mechanism: the
// trainer's epoch and run times and the loader's statistics are Stopwatch readings too.
//
//   Timeline timeline;                                  // collecting from now on
//   { TimeRange range("forward"); model.forward(x); }   // on any thread
//   std::vector<TimeRangeRecord> records = timeline.stop();
//   Stopwatch watch;  ...  watch.seconds();           // seconds since it started
//
// - While no Timeline collects, a TimeRange costs one relaxed atomic load.
// - While one does, a finished range appends {name, thread, depth, start, end} to its
//   thread's buffer (its own lock, uncontended); ranges nest, and depth says how deep.
// - With a device, the range also records an event on the thread's current stream of that
//   device at each end; stop() turns them into device milliseconds (waiting for the last
//   events then, never inside the ranges), so GPU work is timed where it runs (not in a
//   CUDA graph's capture, where the work does not run: there the range is host time only).
// - One Timeline collects at a time; a range still open at stop() is not recorded.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/stream.h"

namespace kiln {

// Seconds since construction (or restart()), on the monotonic clock (steady_clock) every
// TimeRange record is measured with.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  void restart() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

struct TimeRangeRecord {
  std::string name;
  uint64_t thread = 0;  // a small number per thread, in order of first use
  int depth = 0;        // 0 for a range with no enclosing range on its thread
  double start_s = 0;   // seconds since the Timeline started
  double end_s = 0;
  std::optional<double> device_ms = std::nullopt;  // with a device: the time between its events
  double seconds() const { return end_s - start_s; }
};

class Timeline {
 public:
  Timeline();
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  // Stops collecting; the finished ranges, by start time.
  std::vector<TimeRangeRecord> stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

class TimeRange {
 public:
  explicit TimeRange(std::string name, std::optional<Device> device = std::nullopt);
  ~TimeRange();
  TimeRange(const TimeRange&) = delete;
  TimeRange& operator=(const TimeRange&) = delete;

 private:
  struct Open;
  std::unique_ptr<Open> open_;  // null while nothing collects
};

}  // namespace kiln
