// RunLock: one trainer per run folder. The lock is flock(2) on the folder's .kiln-run.lock,
// held for the trainer's life: the kernel releases it when the process ends however it
// ends (an exception, kill -9), so a lock left by a dead process is never in the way, and
// the file itself, which says who holds it, is harmless. A second trainer on the same
// folder is refused at once, naming the holder's pid and host. A command refused before
// its run started (the folder never marked, train/run_folder.h) leaves nothing: the lock
// file goes, and the folder too when the lock made it and it is empty.
//
//   const train::RunLock lock(run.folder);   // throws when another process holds it
#pragma once

#include <string>

#include "train/run_folder.h"

namespace kiln::train {

class RunLock {
 public:
  // Takes the lock (creating the folder and the lock file if needed), or throws.
  explicit RunLock(const RunFolder& folder);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  RunFolder folder_;
  bool made_folder_ = false;
  int fd_ = -1;
};

}  // namespace kiln::train
