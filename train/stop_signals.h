// Stopping a run on a signal, with nothing lost (Note [Stopping on a signal]). While a
// StopSignals is alive (`kiln train` holds one from its start), SIGINT (Ctrl-C), SIGTERM and
// SIGUSR1 (what SLURM sends before a preemption with `--signal=USR1@...`) do not kill the
// process: the first one is recorded, and the Trainer finishes the step it is in, writes a
// checkpoint and returns, saying so; the command then exits with 128 + the signal's number.
// A second signal kills the process at once, as the first would have without Kiln.
//
// Note [Stopping on a signal]:
// - The handler does only async-signal-safe things: it stores the signal's number in a
//   lock-free atomic and writes one line to stderr; on a second signal it restores the
//   default action and raises it again.
// - The Trainer reads the flag after each micro-batch (a load, no system call) and stops
//   at the next optimizer-step boundary (with --accumulate, the micro-batches of a step are
//   never split). A stop in the middle of an epoch writes a mid-epoch checkpoint, which
//   `--resume auto` continues bit for bit; a stop on an epoch's last batch lets the epoch
//   end (its validation and its checkpoint) first.
// - In a --ddp run every rank must stop at the same step, or one would wait in a collective
//   for the others. `kiln launch` forwards the signal to every rank (once: each rank is in a
//   process group of its own, so a terminal's Ctrl-C does not reach it directly too, which
//   would count as the second signal), but each gets it at its own moment; so the ranks agree at log steps (and at each epoch's end), where the
//   step reads the device anyway: one all-reduce of the flags, the maximum wins.
// - The exit code is 128 + the signal (130 for SIGINT, 143 for SIGTERM, 138 for SIGUSR1),
//   what a shell reports for a process the signal killed, so scripts see the usual codes;
//   a SLURM job with `--requeue` restarts its script, whose `kiln train ... --resume auto`
//   continues from the checkpoint (or starts, when there is none).
//
//   train::StopSignals signals;              // for the run's life
//   RunSummary summary = trainer.fit();      // summary.stopped_by: 0, or the signal
#pragma once

namespace kiln::train {

class StopSignals {
 public:
  // The first one alive installs the handlers and clears any earlier request; the last one
  // gone restores the handlers there were.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

// The signal that asked the run to stop, or 0.
int stop_signal();
// Asks as the signal would (tests; a program embedding the Trainer with its own handling).
void request_stop(int signal);
void clear_stop_request();

}  // namespace kiln::train
