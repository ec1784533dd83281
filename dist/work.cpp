// Work (work.h): a completion flag and an error under a mutex.
#include "dist/work.h"

namespace kiln::dist {

void Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_changed_.wait(lock, [this] { return done_; });
  if (error_) std::rethrow_exception(error_);
  if (finish_) {
    const std::function<void()> finish = std::move(finish_);
    finish_ = nullptr;
    finish();  // under the lock: a second waiter returns only once the results are out
  }
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
