// A signal's name as messages write it: "SIGTERM", "SIGUSR1" (glibc's sigabbrev_np with
// "SIG" before it), or "signal N" for a number without one; and the signals that ask a run
// to stop, which `kiln launch` passes on and `kiln train` answers (train/stop_signals.h).
#pragma once

#include <csignal>
#include <string>

namespace kiln {

// An interrupt (Ctrl-C), a termination, and SLURM's warning before a preemption
// (`--signal=USR1@...`).
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

std::string signal_name(int signal);

}  // namespace kiln
