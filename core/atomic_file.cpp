// The atomic save of Note [Atomic save] (core/atomic_file.h) in POSIX calls: lstat and
// readlink resolve the target, open(O_EXCL) creates the temporary file, fchown and fchmod
// copy the old file's owner and mode, then write, fsync, close, rename and the folder's
// fsync. Each call can be made to fail by the test seam (Note [Atomic file faults]).
#include "core/atomic_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/error.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// ---- the test seam (Note [Atomic file faults]) ------------------------------------------------

// This thread's innermost live guard, or null (as the allocation seam, core/fault_injection.cpp).
thread_local const ScopedAtomicFileFault* armed = nullptr;

// True, with errno set, when the test seam fails `step` on this thread.
bool injected(AtomicFileStep step) {
  if (armed == nullptr || armed->step() != step) return false;
  errno = armed->error();
  return true;
}

// ---- step 1: the target ---------------------------------------------------------------------

// Linux's limit on the links followed in one path lookup (a longer chain is ELOOP there too).
constexpr int kMaxSymlinkHops = 40;

struct Target {
  std::string path;
  std::optional<struct stat> existing;  // its lstat, when it exists
};

std::string read_link(const std::string& link, const std::string& who, const std::string& path) {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), buffer, sizeof(buffer));
  if (n < 0 || n == static_cast<ssize_t>(sizeof(buffer))) {
    KILN_CHECK(false, who, ": cannot save ", path, ": readlink(", link, ") failed: ",
               std::strerror(n < 0 ? errno : ENAMETOOLONG));
  }
  return std::string(buffer, static_cast<size_t>(n));
}

// Follows `path` through symlinks to the file a save replaces (or creates).
Target resolve(const std::string& path, const std::string& who) {
  std::string current = path;
  for (int hops = 0;; ++hops) {
    struct stat info {};
    if (::lstat(current.c_str(), &info) != 0) {
      // A missing file is created; a missing folder fails at the create, naming it.
      if (errno == ENOENT) return {current, std::nullopt};
      KILN_CHECK(false, who, ": cannot save ", path, ": lstat(", current, ") failed: ", std::strerror(errno));
    }
    if (!S_ISLNK(info.st_mode)) return {current, info};
    KILN_CHECK(hops < kMaxSymlinkHops, who, ": cannot save ", path, ": more than ", kMaxSymlinkHops,
               " symbolic links in a chain (", std::strerror(ELOOP), ")");
    const fs::path link = read_link(current, who, path);
    // A relative link is relative to the folder holding it.
    current = link.is_absolute() ? link.string() : (fs::path(current).parent_path() / link).string();
  }
}

// ---- step 3: the old file's owner and mode ----------------------------------------------------

// Best effort for the owner and group (Note [Atomic save], step 3): refused, the file
// stays the saver's, as any file the saver creates.
void copy_owner(int fd, const struct stat& old) {
  if (old.st_uid == ::geteuid() && old.st_gid == ::getegid()) return;
  if (::fchown(fd, old.st_uid, old.st_gid) == 0) return;
  [[maybe_unused]] const int ignored = ::fchown(fd, static_cast<uid_t>(-1), old.st_gid);
}

// The size a file name in `folder` may have.
size_t name_max(const std::string& folder) {
  const long limit = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  return limit > 0 ? static_cast<size_t>(limit) : size_t{NAME_MAX};
}

}  // namespace

std::string temporary_file_name(std::string_view name, std::string_view suffix, size_t name_max) {
  const size_t fixed = 1 + suffix.size();  // the leading '.' and the suffix
  const size_t room = name_max > fixed ? name_max - fixed : 1;
  size_t keep = std::min(name.size(), room);
  // Cut before a UTF-8 continuation byte (10xxxxxx), never inside a character.
  while (keep > 1 && keep < name.size() && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  std::string temporary = ".";
  temporary.append(name.substr(0, keep)).append(suffix);
  return temporary;
}

// ---- AtomicFile ---------------------------------------------------------------------------------

AtomicFile::AtomicFile(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
  const Target target = resolve(path_, who_);
  target_ = target.path;
  const fs::path target_path(target_);
  const std::string name = target_path.filename().string();
  KILN_CHECK(!name.empty() && name != "." && name != "..", who_, ": cannot save ", path_,
             ": the path names a folder, not a file");
  KILN_CHECK(!target.existing || S_ISREG(target.existing->st_mode), who_, ": cannot save ", path_, ": ",
             target_, " exists and is not a regular file (a folder, a device or a pipe); it is not replaced");
  folder_ = target_path.has_parent_path() ? target_path.parent_path().string() : ".";
  create_temporary(folder_, name, target.existing.has_value());
  if (target.existing) {
    try {
      copy_owner(fd_, *target.existing);
      if (injected(AtomicFileStep::Chmod) || ::fchmod(fd_, target.existing->st_mode & 07777) != 0) {
        fail("fchmod", temporary_, errno);
      }
    } catch (...) {
      discard();  // the destructor of an object whose constructor throws does not run
      throw;
    }
  }
}

// Step 2. Over an existing file the temporary starts private (0600) and gets the old mode
// later; a new file gets 0666 minus the umask now.
void AtomicFile::create_temporary(const std::string& folder, const std::string& name, bool replacing) {
  static std::atomic<uint64_t> counter{0};
  const size_t limit = name_max(folder);
  const std::string suffix_start = ".tmp-" + std::to_string(::getpid()) + "-";
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string suffix = suffix_start + std::to_string(counter.fetch_add(1));
    temporary_ = (fs::path(folder) / temporary_file_name(name, suffix, limit)).string();
    fd_ = injected(AtomicFileStep::Create)
              ? -1
              : ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, replacing ? 0600 : 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;  // EEXIST: a stale file of a process that had our pid
  }
  const int error = errno;
  const std::string tried = std::exchange(temporary_, std::string());  // nothing of ours to remove
  KILN_CHECK(false, who_, ": cannot save ", path_, ": cannot create a temporary file in ", folder, ": open(",
             tried, ") failed: ", std::strerror(error));
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!temporary_.empty()) ::unlink(std::exchange(temporary_, std::string()).c_str());
}

void AtomicFile::fail(std::string_view call, const std::string& arguments, int error) const {
  KILN_CHECK(false, who_, ": cannot save ", path_, ": ", call, "(", arguments, ") failed: ", std::strerror(error));
  __builtin_unreachable();
}

void AtomicFile::write(const void* data, size_t bytes) { write_fully(data, bytes, -1); }

void AtomicFile::write_at(int64_t offset, const void* data, size_t bytes) {
  KILN_ASSERT(offset >= 0, "AtomicFile: write_at a negative offset (", path_, ")");
  write_fully(data, bytes, offset);
}

// Writes all of `bytes` at the file's position (offset < 0: write) or at `offset`
// (pwrite), through short writes and EINTR.
void AtomicFile::write_fully(const void* data, size_t bytes, int64_t offset) {
  KILN_ASSERT(fd_ >= 0, "AtomicFile: write after commit (", path_, ")");
  const char* call = offset < 0 ? "write" : "pwrite";
  const auto* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = injected(AtomicFileStep::Write) ? -1
                            : offset < 0                    ? ::write(fd_, next, bytes)
                                                            : ::pwrite(fd_, next, bytes, offset);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) fail(call, temporary_, written == 0 ? EIO : errno);
    next += written;
    if (offset >= 0) offset += written;
    bytes -= static_cast<size_t>(written);
  }
}

SaveStatus AtomicFile::commit() {
  KILN_ASSERT(fd_ >= 0, "AtomicFile: commit twice (", path_, ")");
  if (injected(AtomicFileStep::SyncFile) || ::fsync(fd_) != 0) fail("fsync", temporary_, errno);
  // A close can report a delayed write error; it releases the descriptor either way.
  const bool closed = ::close(std::exchange(fd_, -1)) == 0;
  if (injected(AtomicFileStep::Close) || !closed) fail("close", temporary_, errno);
  if (injected(AtomicFileStep::Rename) || ::rename(temporary_.c_str(), target_.c_str()) != 0) {
    fail("rename", temporary_ + ", " + target_, errno);
  }
  temporary_.clear();  // renamed: no temporary file of ours is left to remove
  return sync_folder();
}

// Step 4's last call. The file is in place: a failure here is reported, not thrown.
SaveStatus AtomicFile::sync_folder() const {
  const int folder = ::open(folder_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool opened = folder >= 0;
  int error = opened ? 0 : errno;
  if (opened) {
    if (injected(AtomicFileStep::SyncFolder) || ::fsync(folder) != 0) error = errno;
    ::close(folder);
  }
  // EINVAL: this file system cannot fsync a folder; the rename is as durable as it makes it.
  if (error == 0 || (opened && error == EINVAL)) return {};
  const char* call = opened ? "fsync" : "open";
  return {.durable = false,
          .warning = detail::str_cat(who_, ": saved ", path_, ", but ", call, "(", folder_,
                                     ") failed: ", std::strerror(error),
                                     "; the new file is in place, but a crash soon could bring back the old one")};
}

SaveStatus save_atomically(std::string_view bytes, const std::string& path, std::string who) {
  AtomicFile file(path, std::move(who));
  file.write(bytes);
  return file.commit();
}

// ---- the test seam ------------------------------------------------------------------------------

ScopedAtomicFileFault::ScopedAtomicFileFault(AtomicFileStep step, int error)
    : step_(step), error_(error), outer_(armed) {
  armed = this;
}

ScopedAtomicFileFault::~ScopedAtomicFileFault() { armed = outer_; }

}  // namespace kiln
