// Work: the handle of a collective that runs in the background, as torch.distributed's
// Work. The process group completes it (with an error, if the collective failed);
// wait() blocks until then and rethrows that error on the caller's thread.
//
// A collective queued on a GPU stream (NCCL) also has the event that completes with it:
// wait_stream() then makes the caller's current stream wait for that event, and the host
// goes on, so a training step that consumes the result on the GPU keeps no host-device
// sync (as torch.distributed's NCCL Work.wait()). Without such an event (the ring, whose
// results are in place once it completes) wait_stream() is wait().
//
//   std::shared_ptr<Work> work = group.all_reduce(gradients);
//   ... overlap other work ...
//   work->wait_stream();
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "core/stream.h"

namespace kiln::dist {

class Work {
 public:
  explicit Work(std::string description) : description_(std::move(description)) {}

  // Blocks until the collective is done; throws its error. Every collective has its own
  // timeout, so this returns.
  void wait();
  // Orders the caller's current stream after the collective (no host block) when it ran
  // on a device stream; else wait(). Throws an error already known.
  void wait_stream();
  bool is_completed() const;
  // Whether it finished without error (false while running).
  bool is_success() const;
  const std::string& description() const { return description_; }

  // For the process group: marks it done, with the error that stopped it if any.
  void complete(std::exception_ptr error = nullptr);
  // For the process group: `finish` runs once, on the first thread whose wait() sees a
  // success (the list forms of the collectives copy their results out there).
  void finish_in_wait(std::function<void()> finish) { finish_ = std::move(finish); }
  // For a device backend: the event recorded on its stream after the collective.
  void set_device_done(Event done) { device_done_ = std::move(done); }

 private:
  std::string description_;
  mutable std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::exception_ptr error_;
  std::function<void()> finish_;
  std::optional<Event> device_done_;

  void run_finish();  // mutex_ held
};

}  // namespace kiln::dist
