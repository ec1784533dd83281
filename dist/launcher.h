// launch: starts the ranks of one machine of a distributed job and watches them, as
// torchrun does; `kiln launch` is its command line, and the multi-process tests use it.
//
// Each of the nproc_per_node processes runs `command` with the variables
// init_process_group reads (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// MASTER_ADDR, MASTER_PORT) added to this process's environment, and OMP_NUM_THREADS=1
// when several share the machine and it is unset (as torchrun; each rank can raise it).
// Every line a rank writes to stdout or stderr is passed to `on_line` prefixed with
// "[rank N] " (by default, printed on stdout). When a rank fails (a non-zero exit or a
// signal), the others get SIGTERM, then SIGKILL after `kill_grace`, and the launch returns
// that rank's exit code (128 + the signal for a signal), so the job never hangs on a
// crashed peer. SIGINT, SIGTERM and SIGUSR1 sent to the launcher are forwarded to the
// ranks when forward_signals is set (the command line sets it); a rank that then exits
// with 128 + that signal (a trainer stopping cleanly, train/stop_signals.h) or dies of it
// has not failed, so the others are left to stop too, and the launch returns that code.
// Each rank runs in a process group of its own (a terminal's Ctrl-C reaches the launcher,
// which passes it on once) and gets SIGTERM if the launcher dies.
//
//   LaunchResult r = launch(LaunchOptions{.nproc_per_node = 2, .command = {"./train", "--ddp"}});
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::dist {

struct LaunchOptions {
  int64_t nproc_per_node = 1;
  int64_t nnodes = 1;
  int64_t node_rank = 0;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  std::vector<std::string> command;                                // the program and its arguments
  std::function<void(const std::string& line)> on_line = nullptr;  // default: stdout
  std::chrono::milliseconds kill_grace = std::chrono::seconds(5);
  bool forward_signals = false;
};

struct LaunchResult {
  int exit_code = 0;         // 0 when every rank succeeded
  int64_t failed_rank = -1;  // the global rank that failed first
  std::string failure;       // "rank 3 exited with code 1" / "... was killed by signal 9 (Killed)"
};

LaunchResult launch(const LaunchOptions& options);

}  // namespace kiln::dist
