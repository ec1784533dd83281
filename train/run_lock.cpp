// RunLock (train/run_lock.h): flock, then the holder's name written into the file.
#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace kiln::train {
namespace {

std::string holder_text() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  return "pid " + std::to_string(::getpid()) + " on " + host + "\n";
}

}  // namespace

RunLock::RunLock(const RunFolder& folder) : folder_(folder) {
  std::error_code exists_error;
  made_folder_ = !std::filesystem::exists(folder.root(), exists_error);
  folder.create();
  const std::string path = folder.path(RunFile::Lock);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  KILN_CHECK(fd_ >= 0, "run folder ", folder.root(), ": cannot open its lock ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char held_by[300] = {};
    const ssize_t n = ::pread(fd_, held_by, sizeof held_by - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (made_folder_) std::filesystem::remove(folder.root(), exists_error);
    std::string holder = n > 0 ? std::string(held_by, static_cast<size_t>(n)) : "another process";
    while (!holder.empty() && holder.back() == '\n') holder.pop_back();
    KILN_CHECK(error != EWOULDBLOCK, "run folder ", folder.root(), " is in use by another kiln train (", holder,
               "); wait for it to finish, or choose another --out");
    throw Error("run folder " + folder.root() + ": cannot lock " + path + ": " + std::strerror(error));
  }
  const std::string text = holder_text();
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, text.data(), text.size(), 0);
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  std::error_code error;
  if (!std::filesystem::exists(folder_.path(RunFile::Marker), error)) {  // refused before the run started
    std::filesystem::remove(folder_.path(RunFile::Lock), error);
    if (made_folder_) std::filesystem::remove(folder_.root(), error);  // only when empty
  }
  ::close(fd_);  // releases the flock
}

}  // namespace kiln::train
