// TCP sockets against deadlines (socket.h): getaddrinfo for the address, non-blocking
// sockets waited on with poll, MSG_NOSIGNAL on every send.
#include "dist/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace kiln::dist {
namespace {

std::string system_error() { return std::strerror(errno); }

void set_non_blocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  KILN_CHECK(flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0,
             "socket: fcntl(O_NONBLOCK): ", system_error());
}

// Waits until `fd` is ready for `events` or the deadline passes (false).
bool wait_ready(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int n = ::poll(&p, 1, deadline.remaining_ms());
    if (n > 0) return true;
    if (n == 0 && deadline.passed()) return false;
    KILN_CHECK(n >= 0 || errno == EINTR, "socket: poll: ", system_error());
  }
}

addrinfo* resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  KILN_CHECK(rc == 0, "socket: cannot resolve ", host, ":", port, ": ", gai_strerror(rc));
  return result;
}

std::string endpoint(const std::string& host, uint16_t port) { return host + ":" + std::to_string(port); }

}  // namespace

int Deadline::remaining_ms() const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT32_MAX));
}

Socket::~Socket() { close(); }

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_), peer_(std::move(other.peer_)) { other.fd_ = -1; }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    peer_ = std::move(other.peer_);
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const std::string& host, uint16_t port) {
  addrinfo* addresses = resolve(host, port, /*passive=*/true);
  std::string last_error = "no address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      ::freeaddrinfo(addresses);
      set_non_blocking(fd);
      return Socket(fd, endpoint(host, port));
    }
    last_error = system_error();
    ::close(fd);
  }
  ::freeaddrinfo(addresses);
  KILN_CHECK(false, "socket: cannot listen on ", endpoint(host, port), ": ", last_error);
  return {};
}

Socket Socket::connect(const std::string& host, uint16_t port, Deadline deadline) {
  auto backoff = std::chrono::milliseconds(10);
  std::string last_error;
  while (true) {
    addrinfo* addresses = resolve(host, port, /*passive=*/false);
    for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      set_non_blocking(fd);
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS && wait_ready(fd, POLLOUT, deadline)) {
        int error = 0;
        socklen_t length = sizeof error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        rc = error == 0 ? 0 : -1;
        errno = error;
      }
      if (rc == 0) {
        ::freeaddrinfo(addresses);
        const int on = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        return Socket(fd, endpoint(host, port));
      }
      last_error = system_error();
      ::close(fd);
    }
    ::freeaddrinfo(addresses);
    KILN_CHECK(!deadline.passed(), "socket: cannot connect to ", endpoint(host, port),
               " before the timeout (", last_error, ")");
    std::this_thread::sleep_for(std::min(backoff, std::chrono::milliseconds(deadline.remaining_ms())));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

Socket Socket::accept(Deadline deadline) const {
  if (!wait_ready(fd_, POLLIN, deadline)) return {};
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return {};  // the client went away between poll and accept
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  char host[NI_MAXHOST] = "?", service[NI_MAXSERV] = "?";
  ::getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof host, service, sizeof service,
                NI_NUMERICHOST | NI_NUMERICSERV);
  return Socket(fd, std::string(host) + ":" + service);
}

uint16_t Socket::port() const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  KILN_CHECK(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0,
             "socket: getsockname: ", system_error());
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

std::string Socket::local_host() const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  KILN_CHECK(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0,
             "socket: getsockname: ", system_error());
  char host[NI_MAXHOST] = "?";
  ::getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  return host;
}

void Socket::set_buffer_sizes(int bytes) const {
  // Best effort: the kernel caps the sizes at net.core.{w,r}mem_max and doubles them.
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

size_t Socket::send_some(const void* data, size_t n) const {
  while (true) {
    const ssize_t sent = ::send(fd_, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) return static_cast<size_t>(sent);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    KILN_CHECK(false, "socket: sending to ", peer_, " failed: ", system_error(),
               " (the peer closed the connection or died)");
  }
}

size_t Socket::recv_some(void* data, size_t n) const {
  while (true) {
    const ssize_t got = ::recv(fd_, data, n, MSG_DONTWAIT);
    if (got > 0) return static_cast<size_t>(got);
    KILN_CHECK(got != 0 || n == 0, "socket: ", peer_, " closed the connection");
    if (got == 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    KILN_CHECK(false, "socket: receiving from ", peer_, " failed: ", system_error(),
               " (the peer closed the connection or died)");
  }
}

void Socket::send_all(const void* data, size_t n, Deadline deadline) const {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const size_t sent = send_some(p, n);
    p += sent;
    n -= sent;
    KILN_CHECK(n == 0 || sent > 0 || wait_ready(fd_, POLLOUT, deadline), "socket: sending to ", peer_,
               " timed out (the peer stopped reading)");
  }
}

void Socket::recv_all(void* data, size_t n, Deadline deadline) const {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const size_t got = recv_some(p, n);
    p += got;
    n -= got;
    KILN_CHECK(n == 0 || got > 0 || wait_ready(fd_, POLLIN, deadline), "socket: receiving from ", peer_,
               " timed out (the peer sent nothing)");
  }
}

bool Socket::read_available(std::string& into) const {
  char chunk[65536];
  while (true) {
    const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
    if (got > 0) {
      into.append(chunk, static_cast<size_t>(got));
      continue;
    }
    if (got == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;  // a reset connection is a closed one
  }
}

void Socket::send_frame(const std::string& bytes, Deadline deadline) const {
  KILN_CHECK(bytes.size() <= kMaxFrame, "socket: a message of ", bytes.size(), " bytes to ", peer_,
             " is larger than the ", kMaxFrame, "-byte limit");
  const auto n = static_cast<uint32_t>(bytes.size());
  const unsigned char header[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                                   static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
  send_all(header, 4, deadline);
  send_all(bytes.data(), bytes.size(), deadline);
}

std::string Socket::recv_frame(Deadline deadline) const {
  unsigned char header[4];
  recv_all(header, 4, deadline);
  const uint32_t n =
      header[0] | (header[1] << 8) | (header[2] << 16) | (static_cast<uint32_t>(header[3]) << 24);
  KILN_CHECK(n <= kMaxFrame, "socket: ", peer_, " announced a message of ", n, " bytes, over the ", kMaxFrame,
             "-byte limit");
  std::string bytes(n, '\0');
  recv_all(bytes.data(), n, deadline);
  return bytes;
}

}  // namespace kiln::dist
