// Downloading a dataset file over HTTP(S) with libcurl (Debian's libcurl4-openssl-dev):
// what `kiln data download` and MedMnistOptions::download use.
//
//   data::download(data::medmnist_url("adrenalmnist3d", 28), "~/.medmnist/adrenalmnist3d.npz",
//                  {.expected_md5 = "bbd3c5a5576322bc4cdfea780653b1ce", .progress = show});
//
// Note [Downloads]: the bytes go to <path>.part, never to <path> itself, so a reader never
// sees a partial file under the real name. A .part left by an interrupted transfer is
// resumed (an HTTP Range request from its length; a server that ignores ranges makes the
// transfer start again from 0). When the transfer ends, the .part is checked against the
// expected MD5 and renamed onto <path> (an atomic replace), then the folder is synced. A
// transfer cut short (fewer bytes than the server announced), a stalled one (below 1
// byte/s for stall_timeout seconds), a refused connection or an HTTP error is a
// kiln::Error naming the URL, and keeps the .part for the next try; a completed transfer
// with the wrong MD5 is an error too, and removes the .part (its bytes are wrong, so
// resuming from them would be). A file already at <path> with the expected MD5 is not
// downloaded again. Only http:// and https:// URLs, and redirects to them, are followed;
// a whole transfer must answer 200 and a resumed one 206 (416, "nothing left", lets the
// MD5 judge the .part). Without an expected MD5 a .part is never resumed, since nothing
// could tell a stale one. Downloads of one path are serialised across threads and
// processes by a lock file, <path>.lock, which the holder removes when it is done (a
// waiter that then holds a removed file's lock opens the lock file again). An exception
// thrown by the progress callback aborts the transfer and reaches the caller.
//
// Note [Download limits]: a hostile or broken server must not fill the disk or hold the
// download forever. With max_bytes (the largest the file can be: MedMNIST's is bounded by
// its sample counts), a response announcing more is refused before its body, and one that
// sends more (a stream without a length) is stopped there; both remove the .part, whose
// bytes are wrong. A transfer slower than min_bytes_per_s for stall_timeout seconds is a
// stall (a server sending 1 byte a second is one), an error within about that time.
// Without an expected MD5 a .part can never be resumed, so a failed transfer removes it;
// with one, a cut or stalled transfer keeps it for the next try to resume, and says so.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kiln::data {

struct DownloadOptions {
  std::string expected_md5 = "";  // lowercase hex; empty: not checked
  // Called as bytes arrive: (bytes of the file so far, its total size or -1 when unknown).
  std::function<void(int64_t done, int64_t total)> progress = nullptr;
  double connect_timeout = 30;  // seconds
  double stall_timeout = 60;    // seconds below min_bytes_per_s before giving up
  int64_t min_bytes_per_s = 1024;
  int64_t max_bytes = -1;       // the file's largest possible size (Note [Download limits]); -1: none
  double lock_timeout = 3600;   // seconds to wait for another download of the same path
};

struct DownloadResult {
  bool already_present = false;   // the file was there with the expected MD5: nothing fetched
  bool resumed = false;           // the transfer continued a .part
  int64_t bytes_transferred = 0;  // over the network in this call
  int64_t file_bytes = 0;         // the final file's size
};

DownloadResult download(const std::string& url, const std::string& path, const DownloadOptions& options = {});

}  // namespace kiln::data
