// ByteSource (core/byte_source.h): a buffer in memory, or a file read with pread.
#include "core/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace kiln {

MemorySource::MemorySource(std::span<const uint8_t> bytes, std::string_view name)
    : ByteSource(std::string(name)), bytes_(bytes) {}

void MemorySource::read(int64_t offset, void* dst, int64_t n) const {
  if (n > 0) std::memcpy(dst, bytes_.data() + offset, static_cast<size_t>(n));
}

FileSource::FileSource(const std::string& path, std::string who) : ByteSource(path), who_(std::move(who)) {
  // O_NONBLOCK: opening a pipe for reading would otherwise wait for a writer; opened at
  // once, it is refused by the check below. (A regular file's reads ignore the flag.)
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  KILN_CHECK(fd_ >= 0, who_, ": cannot open ", path, ": ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    KILN_CHECK(false, who_, ": ", path, " is not a regular file");
  }
  size_ = static_cast<int64_t>(info.st_size);
}

FileSource::~FileSource() { ::close(fd_); }

void FileSource::read(int64_t offset, void* dst, int64_t n) const {
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, static_cast<size_t>(n), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    KILN_CHECK(got > 0, who_, ": ", name(), ": read failed at byte ", offset, ": ",
               got == 0 ? "unexpected end of file (was it truncated while reading?)" : std::strerror(errno));
    out += got;
    offset += got;
    n -= got;
  }
}

}  // namespace kiln
