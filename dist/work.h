// Work: the handle of a collective that runs in the background, as torch.distributed's
// Work. The process group completes it (with an error, if the collective failed);
// wait() blocks until then and rethrows that error on the caller's thread.
//
//   std::shared_ptr<Work> work = group.all_reduce(gradients);
//   ... overlap other work ...
//   work->wait();
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>

namespace kiln::dist {

class Work {
 public:
  explicit Work(std::string description) : description_(std::move(description)) {}

  // Blocks until the collective is done; throws its error. Every collective has its own
  // timeout, so this returns.
  void wait();
  bool is_completed() const;
  // Whether it finished without error (false while running).
  bool is_success() const;
  const std::string& description() const { return description_; }

  // For the process group: marks it done, with the error that stopped it if any.
  void complete(std::exception_ptr error = nullptr);
  // For the process group: `finish` runs once, on the first thread whose wait() sees a
  // success (the list forms of the collectives copy their results out there).
  void finish_in_wait(std::function<void()> finish) { finish_ = std::move(finish); }

 private:
  std::string description_;
  mutable std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::exception_ptr error_;
  std::function<void()> finish_;
};

}  // namespace kiln::dist
