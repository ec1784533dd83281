// data::download (data/download.h, Note [Downloads]) against a server on the loopback
// address (tests/data/loopback_http_server.h): a whole transfer with its progress, a file
// already there, a transfer cut short (an error keeping the .part) and then resumed with
// a Range request, a corrupted transfer (an MD5 error removing the .part), a server that
// ignores ranges, a .part that is already whole (416), a stream without end stopped at
// max_bytes and a trickle stopped as a stall, with no .part or .lock left where no later
// try could use them, HTTP and connection errors, and
// `kiln data download` end to end against the same server. Every test runs under a
// watchdog, so a transfer that hangs fails.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "data/download.h"
#include "data/md5.h"
#include "tests/data/loopback_http_server.h"
#include "tests/test_util.h"
#include "tools/cli.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::LoopbackHttpServer;
using Mode = LoopbackHttpServer::Mode;

// 300 kB of varied bytes.
std::string body() {
  std::string bytes(300'000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  return bytes;
}

std::string md5_of(const std::string& bytes) {
  data::Md5 md5;
  md5.update(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return md5.hex_digest();
}

std::string contents(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream out;
  out << file.rdbuf();
  return out.str();
}

void with_watchdog(const std::function<void()>& test) {
  testing::with_watchdog(std::chrono::seconds(60), test);
}

// Note [Download limits]: the folder holds nothing of a failed download, neither the
// .part nor the .lock, whatever the server did.
void expect_nothing_left(const testing::TempFolder& folder) {
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(folder.path())) left.push_back(entry.path().filename().string());
  EXPECT_TRUE(left.empty()) << left.front();
}

TEST(Download, AWholeTransferWithProgressAndThenNothingToFetch) {
  with_watchdog([] {
    const std::string bytes = body();
    LoopbackHttpServer server(bytes);
    const testing::TempFolder folder;
    const std::string path = folder.file("sets/data.npz");  // its folder is created
    int64_t last_done = -1, last_total = -1;
    const data::DownloadResult result = data::download(
        server.url(), path, {.expected_md5 = md5_of(bytes), .progress = [&](int64_t done, int64_t total) {
                               last_done = done;
                               last_total = total;
                             }});
    EXPECT_FALSE(result.already_present);
    EXPECT_FALSE(result.resumed);
    EXPECT_EQ(result.bytes_transferred, 300'000);
    EXPECT_EQ(result.file_bytes, 300'000);
    EXPECT_EQ(contents(path), bytes);
    EXPECT_FALSE(fs::exists(path + ".part"));
    EXPECT_FALSE(fs::exists(path + ".lock"));  // the holder removes it
    EXPECT_EQ(last_done, 300'000);
    EXPECT_EQ(last_total, 300'000);
    const data::DownloadResult again = data::download(server.url(), path, {.expected_md5 = md5_of(bytes)});
    EXPECT_TRUE(again.already_present);
    EXPECT_EQ(server.requests(), 1);
  });
}

TEST(Download, ACutTransferKeepsItsPartAndTheNextOneResumesIt) {
  with_watchdog([] {
    const std::string bytes = body();
    LoopbackHttpServer server(bytes);
    server.set_mode(Mode::Truncate, 120'000);
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    EXPECT_KILN_ERROR(data::download(server.url(), path, {.expected_md5 = md5_of(bytes)}), server.url(),
                      "cut short after 120000 bytes of 300000", "run the download again to resume");
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(fs::file_size(path + ".part"), 120'000u);
    server.set_mode(Mode::Serve);
    const data::DownloadResult result = data::download(server.url(), path, {.expected_md5 = md5_of(bytes)});
    EXPECT_TRUE(result.resumed);
    EXPECT_EQ(result.bytes_transferred, 180'000);
    EXPECT_EQ(contents(path), bytes);
    EXPECT_FALSE(fs::exists(path + ".part"));
    EXPECT_EQ(server.ranges().back(), "bytes=120000-");
  });
}

TEST(Download, ACorruptedTransferIsAnMd5ErrorAndLeavesNothing) {
  with_watchdog([] {
    const std::string bytes = body();
    LoopbackHttpServer server(bytes);
    server.set_mode(Mode::Corrupt, 1234);
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    EXPECT_KILN_ERROR(data::download(server.url(), path, {.expected_md5 = md5_of(bytes)}), "MD5 is",
                      "expected " + md5_of(bytes), "corrupted transfer");
    expect_nothing_left(folder);
    // A file at the path with the wrong contents is fetched again and replaced.
    std::ofstream(path) << "stale";
    server.set_mode(Mode::Serve);
    EXPECT_FALSE(data::download(server.url(), path, {.expected_md5 = md5_of(bytes)}).already_present);
    EXPECT_EQ(contents(path), bytes);
  });
}

TEST(Download, AServerThatIgnoresRangesRestartsAndAWholePartCompletes) {
  with_watchdog([] {
    const std::string bytes = body();
    LoopbackHttpServer server(bytes);
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    std::ofstream(path + ".part") << "garbage that a resume would keep";
    server.set_mode(Mode::IgnoreRange);
    // The whole file sent again is not appended to the .part (nor counted against the
    // file's largest size): the transfer stops at its first bytes and starts over.
    const data::DownloadResult restarted =
        data::download(server.url(), path, {.expected_md5 = md5_of(bytes), .max_bytes = 300'000});
    EXPECT_FALSE(restarted.resumed);
    EXPECT_LT(restarted.bytes_transferred, 2 * 300'000);
    EXPECT_EQ(contents(path), bytes);
    // A .part holding the whole file: the server answers 416 and the .part is checked and kept.
    fs::rename(path, path + ".part");
    server.set_mode(Mode::Serve);
    EXPECT_EQ(data::download(server.url(), path, {.expected_md5 = md5_of(bytes)}).bytes_transferred, 0);
    EXPECT_EQ(contents(path), bytes);
  });
}

TEST(Download, AnHttpErrorWhileResumingKeepsThePart) {
  with_watchdog([] {
    const std::string bytes = body();
    LoopbackHttpServer server(bytes);
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    std::ofstream(path + ".part", std::ios::binary) << bytes.substr(0, 1000);
    server.set_mode(Mode::NotFound);
    EXPECT_KILN_ERROR(data::download(server.url(), path, {.expected_md5 = md5_of(bytes)}), "HTTP 404",
                      "is kept");
    EXPECT_EQ(fs::file_size(path + ".part"), 1000u);
    // Without an MD5 to check it against, a .part is never resumed.
    server.set_mode(Mode::Serve);
    EXPECT_FALSE(data::download(server.url(), path).resumed);
    EXPECT_EQ(contents(path), bytes);
    EXPECT_EQ(server.ranges().back(), "");
  });
}

TEST(Download, AThrowingProgressCallbackAbortsAndConcurrentDownloadsShareOneTransfer) {
  with_watchdog([] {
    const std::string bytes = body();
    LoopbackHttpServer server(bytes);
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    EXPECT_THROW(data::download(server.url(), path,
                                {.expected_md5 = md5_of(bytes),
                                 .progress =
                                     [](int64_t done, int64_t) {
                                       if (done > 0) throw std::runtime_error("cancelled by the user");
                                     }}),
                 std::runtime_error);
    EXPECT_FALSE(fs::exists(path));
    // Four threads fetch the same file: one transfers (under <path>.lock), the others find it there.
    std::vector<std::thread> threads;
    std::atomic<int> fetched{0}, present{0};
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&] {
        const data::DownloadResult r = data::download(server.url(), path, {.expected_md5 = md5_of(bytes)});
        (r.already_present ? present : fetched)++;
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(fetched.load(), 1);
    EXPECT_EQ(present.load(), 3);
    EXPECT_EQ(contents(path), bytes);
  });
}

TEST(Download, AStreamWithoutEndStopsAtTheLargestTheFileCanBe) {
  with_watchdog([] {
    const std::string bytes = body();
    LoopbackHttpServer server(bytes);
    server.set_mode(Mode::Endless);
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    EXPECT_KILN_ERROR(data::download(server.url(), path, {.expected_md5 = md5_of(bytes), .max_bytes = 1'000'000}),
                      "the server sends more than the 1000000 bytes the file can hold (a stream without end?)",
                      "the partial file was removed");
    expect_nothing_left(folder);
    // A length announced past the limit is refused before the body is kept.
    server.set_mode(Mode::Serve);
    EXPECT_KILN_ERROR(data::download(server.url(), path, {.expected_md5 = md5_of(bytes), .max_bytes = 1000}),
                      "more than the 1000 bytes the file can hold (it announced 300000)");
    expect_nothing_left(folder);
    // At the limit exactly, the file is whole.
    EXPECT_EQ(data::download(server.url(), path, {.expected_md5 = md5_of(bytes), .max_bytes = 300'000}).file_bytes,
              300'000);
  });
}

TEST(Download, ATrickleIsAStallWithinItsTimeout) {
  with_watchdog([] {
    LoopbackHttpServer server(body());
    server.set_mode(Mode::Trickle, 200);  // 5 bytes a second
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    // Without an MD5 the .part could never be resumed: it goes.
    EXPECT_KILN_ERROR(data::download(server.url(), path, {.stall_timeout = 2, .min_bytes_per_s = 100}),
                      "the transfer stalled, under 100 bytes/s for 2 s");
    expect_nothing_left(folder);
    // With one, what came is kept for the next try to resume.
    EXPECT_KILN_ERROR(
        data::download(server.url(), path, {.expected_md5 = md5_of(body()), .stall_timeout = 2, .min_bytes_per_s = 100}),
        "the transfer stalled", "is kept: run the download again to resume it");
    EXPECT_TRUE(fs::exists(path + ".part"));
    EXPECT_FALSE(fs::exists(path + ".lock"));
  });
}

TEST(Download, HttpConnectionAndUrlErrors) {
  with_watchdog([] {
    const testing::TempFolder folder;
    const std::string path = folder.file("data.npz");
    std::string closed_url;
    {
      LoopbackHttpServer server("x");
      server.set_mode(Mode::NotFound);
      EXPECT_KILN_ERROR(data::download(server.url(), path), server.url(), "HTTP 404");
      closed_url = server.url();
    }
    expect_nothing_left(folder);
    EXPECT_KILN_ERROR(data::download(closed_url, path, {.connect_timeout = 5}), closed_url);
    EXPECT_KILN_ERROR(data::download("ftp://example.org/x.npz", path), "not an http:// or https:// URL");
    EXPECT_KILN_ERROR(data::download("file:///etc/passwd", path), "not an http:// or https:// URL");
  });
}

TEST(Download, KilnDataDownloadFetchesFromAMirrorAndChecksTheOfficialMd5) {
  with_watchdog([] {
    LoopbackHttpServer server("these are not AdrenalMNIST3D's bytes");
    const testing::TempFolder folder;
    std::ostringstream out, err;
    const int code = tools::run_kiln(
        {"data", "download", "adrenalmnist3d", "--root", folder.path().string(), "--url", server.url()}, out,
        err);
    EXPECT_EQ(code, 1);
    EXPECT_NE(err.str().find("MD5"), std::string::npos) << err.str();
    EXPECT_FALSE(fs::exists(folder.file("adrenalmnist3d.npz")));
    EXPECT_EQ(server.requests(), 1);
    EXPECT_EQ(tools::run_kiln({"data", "download", "adrenalmnist3d", "--size", "32"}, out, err), 2);
    EXPECT_EQ(tools::run_kiln({"data", "fetch"}, out, err), 2);
    EXPECT_EQ(tools::format_progress(50, 200), "\r[#######                       ] 25% 50 B of 200 B");
  });
}

}  // namespace
}  // namespace kiln
