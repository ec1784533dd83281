// LoopbackHttpServer (loopback_http_server.h): POSIX sockets, one thread.
#include "tests/data/loopback_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace kiln::testing {
namespace {

// Whether every byte was sent (false: the client went away).
bool send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The request's headers (up to the blank line), read with a 5 s limit per recv.
std::string read_request(int fd) {
  timeval limit{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  std::string request;
  char buffer[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    request.append(buffer, static_cast<size_t>(n));
  }
  return request;
}

// The value of header `name` (case-insensitive match of "\r\nName:"), or "".
std::string header_value(const std::string& request, const std::string& name) {
  std::string lower = request;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string key = "\r\n" + name + ":";
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = lower.find(key);
  if (at == std::string::npos) return "";
  size_t start = at + key.size();
  while (start < request.size() && request[start] == ' ') ++start;
  return request.substr(start, request.find("\r\n", start) - start);
}

}  // namespace

LoopbackHttpServer::LoopbackHttpServer(std::string body) : body_(std::move(body)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) throw std::runtime_error("LoopbackHttpServer: socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener_, 8) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(listener_);
    throw std::runtime_error("LoopbackHttpServer: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

LoopbackHttpServer::~LoopbackHttpServer() {
  stop_ = true;
  thread_.join();
  ::close(listener_);
}

std::string LoopbackHttpServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void LoopbackHttpServer::set_mode(Mode mode, int64_t at) {
  const std::lock_guard lock(mutex_);
  mode_ = mode;
  at_ = at;
}

std::vector<std::string> LoopbackHttpServer::ranges() const {
  const std::lock_guard lock(mutex_);
  return ranges_;
}

void LoopbackHttpServer::serve() {
  while (!stop_) {
    pollfd waiting{.fd = listener_, .events = POLLIN, .revents = 0};
    if (::poll(&waiting, 1, 50) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    answer(client);
    ::close(client);
  }
}

void LoopbackHttpServer::answer(int client) {
  const std::string request = read_request(client);
  ++requests_;
  const std::string range = header_value(request, "Range");
  Mode mode;
  int64_t at;
  {
    const std::lock_guard lock(mutex_);
    ranges_.push_back(range);
    mode = mode_;
    at = at_;
  }
  const auto size = static_cast<int64_t>(body_.size());
  if (mode == Mode::NotFound) {
    send_all(client, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found");
    return;
  }
  if (mode == Mode::Endless) return stream_endlessly(client);
  if (mode == Mode::Trickle) return trickle(client, at);
  int64_t from = 0;
  if (!range.empty() && mode != Mode::IgnoreRange && range.starts_with("bytes="))
    from = std::stoll(range.substr(6));
  if (from >= size && from > 0) {
    send_all(client, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" + std::to_string(size) +
                         "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    return;
  }
  std::string payload = body_.substr(static_cast<size_t>(from));
  if (mode == Mode::Corrupt && at < static_cast<int64_t>(payload.size()))
    payload[static_cast<size_t>(at)] ^= 0x5a;
  std::string head = from > 0
                         ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(from) +
                               "-" + std::to_string(size - 1) + "/" + std::to_string(size) + "\r\n"
                         : "HTTP/1.1 200 OK\r\n";
  head += "Content-Length: " + std::to_string(payload.size()) +
          "\r\nAccept-Ranges: bytes\r\nConnection: close\r\n\r\n";
  if (mode == Mode::Truncate)
    payload.resize(static_cast<size_t>(std::min<int64_t>(at, static_cast<int64_t>(payload.size()))));
  send_all(client, head + payload);
}

void LoopbackHttpServer::stream_endlessly(int client) {
  if (!send_all(client, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")) return;
  while (!stop_ && send_all(client, body_)) {
  }
}

void LoopbackHttpServer::trickle(int client, int64_t every_ms) {
  if (!send_all(client, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_.size()) +
                            "\r\nConnection: close\r\n\r\n"))
    return;
  for (size_t i = 0; i < body_.size() && !stop_; ++i) {
    if (!send_all(client, body_.substr(i, 1))) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(every_ms));
  }
}

}  // namespace kiln::testing
