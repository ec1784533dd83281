// ProgressBar (progress.h): one formatted line, drawn in place or printed periodically.
#include "train/progress.h"

#include <unistd.h>

#include <algorithm>

namespace kiln::train {
namespace {

std::string duration(double seconds) {
  const auto total = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  else
    std::snprintf(text, sizeof text, "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  return text;
}

}  // namespace

std::string format_progress(const Progress& p, int bar_width) {
  char text[160];
  std::string line;
  std::snprintf(text, sizeof text, "epoch %lld/%lld ", static_cast<long long>(p.epoch),
                static_cast<long long>(p.epochs));
  line += text;
  if (p.steps > 0) {
    const double done = std::clamp(static_cast<double>(p.step) / static_cast<double>(p.steps), 0.0, 1.0);
    const int filled = static_cast<int>(done * bar_width);
    line += '[';
    line.append(static_cast<size_t>(filled), '=');
    if (filled < bar_width) line += '>';
    line.append(static_cast<size_t>(std::max(0, bar_width - filled - 1)), ' ');
    line += "] ";
    std::snprintf(text, sizeof text, "%lld/%lld", static_cast<long long>(p.step),
                  static_cast<long long>(p.steps));
  } else {
    std::snprintf(text, sizeof text, "step %lld", static_cast<long long>(p.step));
  }
  line += text;
  std::snprintf(text, sizeof text, "  %.1f samples/s", p.samples_per_s);
  line += text;
  if (p.loss) {
    std::snprintf(text, sizeof text, "  loss %.4f", *p.loss);
    line += text;
  }
  if (p.lr) {
    std::snprintf(text, sizeof text, "  lr %.2e", *p.lr);
    line += text;
  }
  if (p.eta_s) {
    line += "  ETA ";
    line += duration(*p.eta_s);
  }
  return line;
}

ProgressBar::ProgressBar(std::ostream& out, bool terminal, std::chrono::milliseconds interval)
    : out_(out), terminal_(terminal), throttle_(terminal ? std::chrono::milliseconds(100) : interval) {}

bool ProgressBar::is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) == 1; }

void ProgressBar::update(const Progress& progress) {
  const bool last = progress.steps > 0 && progress.step >= progress.steps;
  if (last)
    throttle_.mark();
  else if (!throttle_.due())
    return;
  if (terminal_)
    out_ << "\r\033[K" << format_progress(progress) << (last ? "\n" : "") << std::flush;
  else
    out_ << format_progress(progress) << "\n" << std::flush;
}

}  // namespace kiln::train
