// ProgressBar: a training loop's progress for people. On a terminal, one line redrawn in
// place (carriage return):
//   epoch 3/100 [========>           ] 120/391  412.3 samples/s  loss 0.4321  lr 1.00e-03  ETA 0:41
// elsewhere (CI, a log file) a plain line every `interval` and at the end of each epoch,
// so logs stay readable. Redrawing is throttled to 10 per second on a terminal. The first
// update always draws (Note [Never, not the clock's zero] in core/throttle.h).
//
//   ProgressBar bar(std::cout, /*terminal=*/ProgressBar::is_terminal(stdout));
//   bar.update({.epoch = 3, .epochs = 100, .step = 120, .steps = 391, .samples_per_s = 412.3, .loss = 0.4321,
//   .lr = 1e-3});
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>

#include "core/throttle.h"

namespace kiln::train {

struct Progress {
  int64_t epoch = 0;
  int64_t epochs = 0;
  int64_t step = 0;   // steps done in this epoch
  int64_t steps = 0;  // steps in the epoch (0: unknown)
  double samples_per_s = 0;
  std::optional<double> loss = std::nullopt;
  std::optional<double> lr = std::nullopt;
  std::optional<double> eta_s = std::nullopt;  // seconds left in the epoch
};

// The line, without the terminal's carriage return (a pure function, for tests).
std::string format_progress(const Progress& progress, int bar_width = 20);

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, bool terminal,
              std::chrono::milliseconds interval = std::chrono::seconds(30));
  // Draws (throttled); the last step of an epoch always draws, and ends the line.
  void update(const Progress& progress);
  static bool is_terminal(std::FILE* stream);

 private:
  std::ostream& out_;
  bool terminal_;
  Throttle throttle_;
};

}  // namespace kiln::train
