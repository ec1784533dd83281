// StopSignals (stop_signals.h): the handler stores the first signal in an atomic and writes
// one line; a second restores the default action and raises it again. Installed once for
// all the StopSignals alive (a count under a mutex).
#include "train/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iterator>
#include <mutex>

#include "core/signal_name.h"  // kStopSignals

namespace kiln::train {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free atomic");

// The handlers are the process's: the first StopSignals installs them, the last one gone
// restores what was there (in-process runs, as the tests make, may overlap).
std::mutex g_install_mutex;
int g_holders = 0;
struct sigaction g_previous[std::size(kStopSignals)];

void on_stop_signal(int signal) {
  if (g_stop_signal.exchange(signal) != 0) {  // the second: stop at once
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  static const char kLine[] =
      "\nkiln: stopping after this step, with a checkpoint (send the signal again to stop at once)\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
}

}  // namespace

StopSignals::StopSignals() {
  const std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_holders++ > 0) return;
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read or a wait the signal interrupts goes on
  for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &action, &g_previous[i]);
}

StopSignals::~StopSignals() {
  const std::lock_guard<std::mutex> lock(g_install_mutex);
  if (--g_holders > 0) return;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &g_previous[i], nullptr);
}

int stop_signal() { return g_stop_signal.load(std::memory_order_relaxed); }

void request_stop(int signal) { g_stop_signal = signal; }

void clear_stop_request() { g_stop_signal = 0; }

}  // namespace kiln::train
