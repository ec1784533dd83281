// download (download.h): Note [Downloads]. One libcurl easy handle per attempt, writing
// the response body into <path>.part (bodies of HTTP errors and redirects are dropped),
// at most two attempts (the second when a server will not resume).
#include "data/download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

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
  const DownloadOptions* options = nullptr;
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
  if (std::fwrite(data, 1, bytes, t.file) != bytes) {
    t.write_error = std::strerror(errno);
    return 0;  // makes curl fail with CURLE_WRITE_ERROR
  }
  t.written += static_cast<int64_t>(bytes);
  return bytes;
}

int report_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  const auto& t = *static_cast<Transfer*>(user);
  if (t.options->progress && response_code(t.curl) < 300) {
    t.options->progress(t.start + now, total > 0 ? t.start + total : -1);
  }
  return 0;
}

struct Attempt {
  CURLcode code = CURLE_OK;
  long status = 0;
  int64_t written = 0;
  int64_t announced = -1;  // Content-Length of this response, when given
  std::string message;
};

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};

// One transfer of `url` into `part`, appending from `start` bytes (a Range request) or
// writing it anew.
Attempt fetch(const std::string& url, const std::string& part, int64_t start,
              const DownloadOptions& options) {
  FILE* file = std::fopen(part.c_str(), start > 0 ? "ab" : "wb");
  KILN_CHECK(file != nullptr, "download: cannot write '", part, "': ", std::strerror(errno));
  const std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  KILN_CHECK(curl != nullptr, "download: libcurl could not start a transfer");
  Transfer t{
      .curl = curl.get(), .file = file, .start = start, .written = 0, .write_error = {}, .options = &options};
  char error_buffer[CURL_ERROR_SIZE] = {};
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "kiln-data-download/0.1");
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout * 1000));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(options.stall_timeout)));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, report_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  if (start > 0) curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(start));
  Attempt attempt;
  attempt.code = curl_easy_perform(h);
  attempt.status = response_code(h);
  curl_off_t length = -1;
  if (curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK)
    attempt.announced = length;
  attempt.written = t.written;
  attempt.message = t.write_error.empty()
                        ? (error_buffer[0] != 0 ? error_buffer : curl_easy_strerror(attempt.code))
                        : "writing '" + part + "': " + t.write_error;
  const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const bool closed = std::fclose(file) == 0;
  KILN_CHECK(flushed && closed, "download: cannot finish writing '", part, "': ", std::strerror(errno));
  return attempt;
}

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
  if (fs::is_regular_file(path, ec) &&
      (options.expected_md5.empty() || md5_of_file(path) == options.expected_md5)) {
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
  const std::string part = path + ".part";
  // A transfer that failed before its first byte leaves no empty .part behind.
  struct RemoveIfEmpty {
    const std::string& part;
    ~RemoveIfEmpty() {
      std::error_code ignored;
      if (fs::exists(part, ignored) && size_of(part) == 0) fs::remove(part, ignored);
    }
  } remove_if_empty{part};
  int64_t start = size_of(part);
  result.resumed = start > 0;
  for (int tries = 0;; ++tries) {
    const Attempt attempt = fetch(url, part, start, options);
    result.bytes_transferred += attempt.written;
    const bool range_refused = attempt.code == CURLE_RANGE_ERROR || (start > 0 && attempt.status == 200);
    if (start > 0 && range_refused && tries == 0) {  // the server will not resume: start again
      start = 0;
      result.resumed = false;
      continue;
    }
    if (start > 0 && attempt.status == 416) break;  // the .part already holds the whole file
    if (attempt.code == CURLE_PARTIAL_FILE) {
      KILN_CHECK(false, "download: ", url, ": the transfer was cut short after ", size_of(part), " bytes",
                 attempt.announced >= 0 ? " of " + std::to_string(start + attempt.announced) : std::string(),
                 "; the partial file '", part, "' is kept: run the download again to resume it");
    }
    if (attempt.code == CURLE_OPERATION_TIMEDOUT) {
      KILN_CHECK(false, "download: ", url, ": the transfer stalled (", attempt.message,
                 "); the partial file '", part, "' is kept: run the download again to resume it");
    }
    KILN_CHECK(attempt.code == CURLE_OK, "download: ", url, ": ", attempt.message);
    KILN_CHECK(attempt.status < 400, "download: ", url, ": HTTP ", attempt.status);
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
