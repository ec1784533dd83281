// Work (work.h): a completion flag, an error and, for device collectives, the event that
// completes with them, under a mutex.
#include "dist/work.h"

namespace kiln::dist {

void Work::run_finish() {
  if (!finish_) return;
  const std::function<void()> finish = std::move(finish_);
  finish_ = nullptr;
  finish();  // under the lock: a second waiter returns only once the results are out
}

void Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_changed_.wait(lock, [this] { return done_; });
  if (error_) std::rethrow_exception(error_);
  run_finish();
}

void Work::wait_stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_done_ && !error_) {
      // The collective's stream orders the rest; what follows on the caller's stream waits.
      Stream::current(device_done_->device()).wait(*device_done_);
      run_finish();
      return;
    }
  }
  wait();
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ && !error_;
}

void Work::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  done_changed_.notify_all();
}

}  // namespace kiln::dist
