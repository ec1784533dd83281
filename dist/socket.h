// TCP sockets for the distributed layer: a listening socket, a connection, and whole
// messages sent and received against a deadline, so no call can block forever.
//
// Every call that waits takes a Deadline and polls the socket until it is ready or the
// deadline passes; a timeout, a peer that closed the connection and a system error are
// each a kiln::Error naming the peer ("127.0.0.1:29500") and what was being done. Sockets
// are non-blocking throughout, TCP_NODELAY is set on connections (the store and the
// collectives send small messages and wait for answers), SIGPIPE is never raised (a
// write to a closed peer is an error return, MSG_NOSIGNAL).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::dist {

using Clock = std::chrono::steady_clock;

// A point in time a wait must end by; `what` says, in messages, what was waited for.
struct Deadline {
  Clock::time_point at;
  static Deadline after(std::chrono::milliseconds timeout) { return {Clock::now() + timeout}; }
  // Milliseconds left, at least 0, at most INT32_MAX (poll's argument).
  int remaining_ms() const;
  bool passed() const { return Clock::now() >= at; }
};

class Socket {
 public:
  Socket() = default;
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // A socket listening on host:port (port 0: one the system picks; port() says which).
  static Socket listen(const std::string& host, uint16_t port);
  // A connection to host:port, retried with exponential backoff (10 ms doubling up to
  // 1 s) while the peer refuses or is unreachable, until `deadline`: the server may start
  // after its clients.
  static Socket connect(const std::string& host, uint16_t port, Deadline deadline);
  // The next connection on a listening socket, or an invalid Socket at the deadline.
  Socket accept(Deadline deadline) const;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  uint16_t port() const;                             // the local port
  std::string local_host() const;                    // the local address, numeric
  const std::string& peer() const { return peer_; }  // "host:port", for messages
  // Names the peer in messages from now on ("rank 2 (10.0.0.3:41234)").
  void set_peer_name(std::string name) { peer_ = std::move(name); }
  // Asks for kernel send and receive buffers of `bytes` each (SO_SNDBUF/SO_RCVBUF): the
  // collectives stream megabytes and want the window to stay open.
  void set_buffer_sizes(int bytes) const;
  // Closes the connection now; the peer sees it closed.
  void close();

  // As much as the kernel takes or has right now, without waiting: the bytes moved, 0
  // when it would block. A closed peer or a system error is an error.
  size_t send_some(const void* data, size_t n) const;
  size_t recv_some(void* data, size_t n) const;

  // Exactly n bytes, or an error (timeout, peer closed, system error).
  void send_all(const void* data, size_t n, Deadline deadline) const;
  void recv_all(void* data, size_t n, Deadline deadline) const;
  // Appends whatever bytes have arrived, without waiting; false when the peer has closed
  // the connection.
  bool read_available(std::string& into) const;
  // One frame: a little-endian uint32 length, then that many bytes (at most kMaxFrame).
  void send_frame(const std::string& bytes, Deadline deadline) const;
  std::string recv_frame(Deadline deadline) const;

  static constexpr uint32_t kMaxFrame = 1u << 30;

 private:
  Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  int fd_ = -1;
  std::string peer_;
};

}  // namespace kiln::dist
