// LoopbackHttpServer: a tiny HTTP/1.1 server on 127.0.0.1 (an ephemeral port) that serves
// one body, for the download tests: whole (200), from a Range request's offset (206; 416
// past the end), or misbehaving on purpose: cutting the body short after `at` bytes while
// announcing all of it, flipping byte `at`, ignoring Range headers, answering 404,
// streaming the body again and again without a length (Endless), or sending one byte
// every `at` milliseconds (Trickle). One connection at a time, closed after each
// response; the accept loop and the endless senders poll a stop flag, so the destructor
// stops and joins it promptly.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::testing {

class LoopbackHttpServer {
 public:
  enum class Mode { Serve, Truncate, Corrupt, IgnoreRange, NotFound, Endless, Trickle };

  explicit LoopbackHttpServer(std::string body);
  ~LoopbackHttpServer();
  LoopbackHttpServer(const LoopbackHttpServer&) = delete;
  LoopbackHttpServer& operator=(const LoopbackHttpServer&) = delete;

  std::string url(const std::string& path = "/data.npz") const;
  void set_mode(Mode mode, int64_t at = 0);
  int requests() const { return requests_.load(); }
  // The Range header of each request, "" when it had none.
  std::vector<std::string> ranges() const;

 private:
  void serve();
  void answer(int client);
  void stream_endlessly(int client);
  void trickle(int client, int64_t every_ms);

  std::string body_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  mutable std::mutex mutex_;
  Mode mode_ = Mode::Serve;
  int64_t at_ = 0;
  std::vector<std::string> ranges_;
  std::thread thread_;
};

}  // namespace kiln::testing
