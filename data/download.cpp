// download (download.h): Note [Downloads]. One libcurl easy handle per attempt, writing
// the response body into <path>.part (bodies of HTTP errors and redirects are dropped),
// at most two attempts (the second when a server will not resume).
#include "data/download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "data/md5.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  CURL* curl = nullptr;
  FILE* file = nullptr;
  int64_t start = 0;    // bytes of the .part before this attempt
  int64_t written = 0;  // bytes written by this attempt
  std::string write_error;
  bool too_large = false;      // Note [Download limits]: more than options->max_bytes
  bool range_ignored = false;  // a resumed request answered 200: the whole file again
  const DownloadOptions* options = nullptr;
  std::exception_ptr callback_error = nullptr;  // thrown by the progress callback
};

long response_code(CURL* curl) {
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

size_t write_body(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (response_code(t.curl) >= 300) return bytes;  // an error page or a redirect's body: dropped
  if (t.start > 0 && response_code(t.curl) == 200) {  // not appended to the .part: start again
    t.range_ignored = true;
    return 0;
  }
  const int64_t limit = t.options->max_bytes;
  curl_off_t announced = -1;
  curl_easy_getinfo(t.curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
  if (limit >= 0 && (t.start + t.written + static_cast<int64_t>(bytes) > limit ||
                     (announced > 0 && t.start + announced > limit))) {
    t.too_large = true;
    return 0;  // makes curl fail with CURLE_WRITE_ERROR
  }
  if (std::fwrite(data, 1, bytes, t.file) != bytes) {
    t.write_error = std::strerror(errno);
    return 0;  // makes curl fail with CURLE_WRITE_ERROR
  }
  t.written += static_cast<int64_t>(bytes);
  return bytes;
}

// An exception must not unwind through libcurl's C frames: it is kept, the transfer is
// aborted (non-zero return), and fetch() rethrows it.
int report_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto& t = *static_cast<Transfer*>(user);
  if (!t.options->progress || response_code(t.curl) >= 300) return 0;
  try {
    t.options->progress(t.start + now, total > 0 ? t.start + total : -1);
    return 0;
  } catch (...) {
    t.callback_error = std::current_exception();
    return 1;
  }
}

struct Attempt {
  CURLcode code = CURLE_OK;
  long status = 0;
  int64_t written = 0;
  int64_t announced = -1;  // Content-Length of this response, when given
  bool too_large = false;
  std::string message;
};

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct FileCloser {
  void operator()(FILE* file) const { std::fclose(file); }
};

// Milliseconds of a timeout in seconds, for libcurl's long options (clamped: a day at most).
long milliseconds(double seconds, const char* what) {
  KILN_CHECK(std::isfinite(seconds) && seconds > 0, "download: ", what,
             " must be a positive number of seconds, got ", seconds);
  return static_cast<long>(std::min(seconds, 86400.0) * 1000);
}

template <typename Value>
void set(CURL* h, CURLoption option, Value value, const char* name) {
  const CURLcode code = curl_easy_setopt(h, option, value);
  KILN_CHECK(code == CURLE_OK, "download: libcurl refused ", name, ": ", curl_easy_strerror(code));
}

// One transfer of `url` into `part`, appending from `start` bytes (a Range request) or
// writing it anew.
Attempt fetch(const std::string& url, const std::string& part, int64_t start,
              const DownloadOptions& options) {
  std::unique_ptr<FILE, FileCloser> file(std::fopen(part.c_str(), start > 0 ? "ab" : "wb"));
  KILN_CHECK(file != nullptr, "download: cannot write '", part, "': ", std::strerror(errno));
  const std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  KILN_CHECK(curl != nullptr, "download: libcurl could not start a transfer");
  Transfer t{.curl = curl.get(),
             .file = file.get(),
             .start = start,
             .written = 0,
             .write_error = {},
             .options = &options,
             .callback_error = nullptr};
  char error_buffer[CURL_ERROR_SIZE] = {};
  CURL* h = curl.get();
  set(h, CURLOPT_URL, url.c_str(), "the URL");
  set(h, CURLOPT_PROTOCOLS_STR, "http,https", "CURLOPT_PROTOCOLS_STR");
  set(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https", "CURLOPT_REDIR_PROTOCOLS_STR");
  set(h, CURLOPT_FOLLOWLOCATION, 1L, "CURLOPT_FOLLOWLOCATION");
  set(h, CURLOPT_MAXREDIRS, 10L, "CURLOPT_MAXREDIRS");
  set(h, CURLOPT_USERAGENT, "kiln-data-download/0.1", "CURLOPT_USERAGENT");
  set(h, CURLOPT_ERRORBUFFER, error_buffer, "CURLOPT_ERRORBUFFER");
  set(h, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(options.connect_timeout, "connect_timeout"),
      "the connect timeout");
  KILN_CHECK(options.min_bytes_per_s >= 1, "download: min_bytes_per_s must be at least 1, got ", options.min_bytes_per_s);
  set(h, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(std::min<int64_t>(options.min_bytes_per_s, 1 << 30)),
      "CURLOPT_LOW_SPEED_LIMIT");
  set(h, CURLOPT_LOW_SPEED_TIME, std::max(1L, milliseconds(options.stall_timeout, "stall_timeout") / 1000),
      "the stall timeout");
  set(h, CURLOPT_NOSIGNAL, 1L, "CURLOPT_NOSIGNAL");
  set(h, CURLOPT_WRITEFUNCTION, write_body, "CURLOPT_WRITEFUNCTION");
  set(h, CURLOPT_WRITEDATA, &t, "CURLOPT_WRITEDATA");
  set(h, CURLOPT_NOPROGRESS, 0L, "CURLOPT_NOPROGRESS");
  set(h, CURLOPT_XFERINFOFUNCTION, report_progress, "CURLOPT_XFERINFOFUNCTION");
  set(h, CURLOPT_XFERINFODATA, &t, "CURLOPT_XFERINFODATA");
  if (start > 0)
    set(h, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(start), "CURLOPT_RESUME_FROM_LARGE");
  Attempt attempt;
  attempt.code = curl_easy_perform(h);
  attempt.status = response_code(h);
  curl_off_t length = -1;
  if (curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK)
    attempt.announced = length;
  attempt.written = t.written;
  attempt.too_large = t.too_large;
  attempt.message = t.write_error.empty()
                        ? (error_buffer[0] != 0 ? error_buffer : curl_easy_strerror(attempt.code))
                        : "writing '" + part + "': " + t.write_error;
  const bool flushed = std::fflush(file.get()) == 0 && ::fsync(::fileno(file.get())) == 0;
  const bool closed = std::fclose(file.release()) == 0;
  KILN_CHECK(flushed && closed, "download: cannot finish writing '", part, "': ", std::strerror(errno));
  if (t.callback_error) std::rethrow_exception(t.callback_error);
  return attempt;
}

// Note [Downloads]: one download of a path at a time, across threads and processes (data
// parallel ranks fetching the same dataset): an exclusive flock on <path>.lock, waited for
// up to `timeout` seconds. The holder removes the file before it lets go; a waiter that
// gets the lock of a file no longer there (or replaced) holds nothing and tries again.
class PathLock {
 public:
  PathLock(const std::string& path, double timeout) : lock_(path + ".lock") {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout));
    while (true) {
      fd_ = ::open(lock_.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
      KILN_CHECK(fd_ >= 0, "download: cannot open the lock file '", lock_, "': ", std::strerror(errno));
      wait_for_lock(path, timeout, deadline);
      if (still_named()) return;
      ::close(fd_);
    }
  }
  ~PathLock() {
    ::unlink(lock_.c_str());  // while holding it, so no one holds the name's lock meanwhile
    ::close(fd_);             // closing releases the lock
  }
  PathLock(const PathLock&) = delete;
  PathLock& operator=(const PathLock&) = delete;

 private:
  std::string lock_;
  int fd_ = -1;

  void wait_for_lock(const std::string& path, double timeout, std::chrono::steady_clock::time_point deadline) {
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() > deadline) {
        const int error = errno;
        ::close(fd_);
        KILN_CHECK(false, "download: '", path, "' is being downloaded by another process or thread (", lock_,
                   " held for ", timeout, " s)",
                   error != EWOULDBLOCK ? std::string(": ") + std::strerror(error) : "");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Whether the file locked is still the one the name points to.
  bool still_named() const {
    struct stat held {}, named {};
    return ::fstat(fd_, &held) == 0 && ::stat(lock_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
           held.st_ino == named.st_ino;
  }
};

void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

int64_t size_of(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

}  // namespace

DownloadResult download(const std::string& url, const std::string& path, const DownloadOptions& options) {
  KILN_CHECK(url.starts_with("http://") || url.starts_with("https://"), "download: '", url,
             "' is not an http:// or https:// URL");
  DownloadResult result;
  std::error_code ec;
  const auto present = [&] {
    return fs::is_regular_file(path, ec) &&
           (options.expected_md5.empty() || md5_of_file(path) == options.expected_md5);
  };
  if (present()) {
    result.already_present = true;
    result.file_bytes = size_of(path);
    return result;
  }
  init_curl_once();
  const fs::path folder = fs::path(path).parent_path();
  if (!folder.empty()) {
    fs::create_directories(folder, ec);
    KILN_CHECK(!ec, "download: cannot create the folder '", folder.string(), "': ", ec.message());
  }
  const PathLock lock(path, options.lock_timeout);
  if (present()) {  // another process finished it while this one waited
    result.already_present = true;
    result.file_bytes = size_of(path);
    return result;
  }
  const std::string part = path + ".part";
  // A transfer that failed before its first byte leaves no empty .part behind.
  struct RemoveIfEmpty {
    const std::string& part;
    ~RemoveIfEmpty() {
      std::error_code ignored;
      if (fs::exists(part, ignored) && size_of(part) == 0) fs::remove(part, ignored);
    }
  } remove_if_empty{part};
  // A .part that cannot be checked (no MD5) is not resumed: it may hold another version.
  int64_t start = options.expected_md5.empty() ? 0 : size_of(part);
  result.resumed = start > 0;
  // Note [Download limits]: a failed transfer keeps its .part only when a later try can
  // resume it (an MD5 to check the whole by).
  const bool resumable = !options.expected_md5.empty();
  const auto stop = [&](const std::string& what) {
    if (resumable && size_of(part) > 0)
      KILN_CHECK(false, "download: ", url, ": ", what, "; the partial file '", part,
                 "' is kept: run the download again to resume it");
    fs::remove(part, ec);
    KILN_CHECK(false, "download: ", url, ": ", what);
  };
  for (int tries = 0;; ++tries) {
    Attempt attempt;
    try {
      attempt = fetch(url, part, start, options);
    } catch (const Error&) {
      if (!resumable) fs::remove(part, ec);
      throw;
    }
    result.bytes_transferred += attempt.written;
    if (attempt.too_large) {
      fs::remove(part, ec);  // its bytes are not the file's
      KILN_CHECK(false, "download: ", url, ": the server sends more than the ", options.max_bytes,
                 " bytes the file can hold",
                 attempt.announced >= 0 ? " (it announced " + std::to_string(start + attempt.announced) + ")"
                                        : std::string(" (a stream without end?)"),
                 "; stopped there, and the partial file was removed");
    }
    if (start > 0 && attempt.status == 416) break;  // the .part may be whole: the MD5 below decides
    if (attempt.status >= 400) stop("HTTP " + std::to_string(attempt.status));
    const bool range_ignored = start > 0 && attempt.status == 200;
    if (range_ignored && tries == 0) {  // the server will not resume: start again
      start = 0;
      result.resumed = false;
      continue;
    }
    if (attempt.code == CURLE_PARTIAL_FILE) {
      stop("the transfer was cut short after " + std::to_string(size_of(part)) + " bytes" +
           (attempt.announced >= 0 ? " of " + std::to_string(start + attempt.announced) : std::string()));
    }
    if (attempt.code == CURLE_OPERATION_TIMEDOUT) {
      stop(detail::str_cat("the transfer stalled, under ", options.min_bytes_per_s, " bytes/s for ",
                           options.stall_timeout, " s (", attempt.message, ")"));
    }
    if (attempt.code != CURLE_OK) stop(attempt.message);
    if (attempt.status != (start > 0 ? 206 : 200)) {
      stop("unexpected HTTP " + std::to_string(attempt.status) +
           (start > 0 ? " to a resumed request (206 expected)" : " (200 expected)"));
    }
    break;
  }
  if (!options.expected_md5.empty()) {
    const std::string got = md5_of_file(part);
    if (got != options.expected_md5) {
      fs::remove(part, ec);
      KILN_CHECK(false, "download: ", url, ": the downloaded file's MD5 is ", got, ", expected ",
                 options.expected_md5,
                 " (a corrupted transfer); the partial file was removed: run the download again");
    }
  }
  fs::rename(part, path, ec);
  KILN_CHECK(!ec, "download: cannot rename '", part, "' to '", path, "': ", ec.message());
  sync_folder(folder);
  result.file_bytes = size_of(path);
  return result;
}

}  // namespace kiln::data
