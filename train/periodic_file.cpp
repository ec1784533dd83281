// PeriodicFile (train/periodic_file.h): the text in memory, a Throttle, and either an
// atomic save of the whole or one append write of what is new.
#include "train/periodic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/atomic_file.h"
#include "core/error.h"

namespace kiln::train {

PeriodicFile::PeriodicFile(std::string path, Mode mode, std::chrono::milliseconds interval, std::string owner)
    : path_(std::move(path)), mode_(mode), owner_(std::move(owner)), throttle_(interval) {
  if (mode_ == Mode::Append) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    KILN_CHECK(fd_ >= 0, owner_, ": cannot open ", path_, ": ", std::strerror(errno));
  }
}

PeriodicFile::~PeriodicFile() {
  try {
    save();
  } catch (const Error&) {
    // A destructor must not throw: the file keeps what was saved before.
  }
  if (fd_ >= 0) ::close(fd_);
}

void PeriodicFile::append(std::string_view text) {
  text_ += text;
  dirty_ = true;
}

void PeriodicFile::replace(std::string text) {
  KILN_CHECK(mode_ == Mode::Replace, owner_, ": ", path_, " is appended to, not replaced");
  text_ = std::move(text);
  dirty_ = true;
}

void PeriodicFile::save_if_due() {
  if (dirty_ && throttle_.due()) save();
}

void PeriodicFile::save() {
  throttle_.mark();
  if (!dirty_) return;
  if (mode_ == Mode::Replace)
    save_atomically(text_, path_, owner_);
  else
    write_appended();
  dirty_ = false;
}

// The pending records in one write (a short write continues where it stopped). On failure
// they are dropped, not retried: bytes already written would be written twice.
void PeriodicFile::write_appended() {
  std::string pending;
  pending.swap(text_);
  size_t done = 0;
  while (done < pending.size()) {
    const ssize_t n = ::write(fd_, pending.data() + done, pending.size() - done);
    if (n < 0 && errno == EINTR) continue;
    KILN_CHECK(n > 0, owner_, ": writing ", path_, " failed: ", std::strerror(n < 0 ? errno : EIO));
    done += static_cast<size_t>(n);
  }
}

}  // namespace kiln::train
