// TCPStore: the rendezvous key-value store of the distributed layer, as torch.distributed's
// TCPStore: one process (rank 0, or a standalone one) runs the server, every rank is a
// client, and keys and values are byte strings.
//
//   set(key, value)                   stores; wakes whoever waits for the key
//   get(key)                          the value, waiting until the key is set
//   add(key, delta)                   an integer counter (stored as its decimal text),
//                                     created at 0; returns the new value, atomically
//   compare_set(key, expected, desired)  sets desired when the value is `expected` (or the
//                                     key is absent and `expected` is empty); returns the
//                                     value now stored
//   wait(keys)                        returns once every key is set
//   check(keys)                       whether every key is set, without waiting
//   delete_key(key), num_keys()
// Every call that waits has a timeout (the store's, 10 minutes unless set, or the call's);
// a timeout is a kiln::Error naming the keys still missing, so a rank that never arrived
// is named by its key ("rank/3"). The server keeps the waits itself and answers when the
// keys arrive or the time is up; a client also gives up a few seconds after that, so a
// dead server is an error, never a hang. A server that goes away makes every call of
// every client an error saying so. Clients connect with backoff (dist/socket.h), so they
// may start before the server.
//
// Note [Store protocol]: each request and reply is a frame (a 4-byte length, then the
// bytes): a one-byte op, then its fields, strings as a 4-byte length and the bytes,
// integers as 8 little-endian bytes. The server is one thread polling the listening
// socket and every client, buffering partial frames, so a slow client delays no one.
//
//   TCPStore store(TCPStoreOptions{.host_name = "127.0.0.1", .port = 29500, .world_size = 2, .is_master =
//   true});
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dist/socket.h"

namespace kiln::dist {

// PyTorch's TCPStore arguments in its order.
struct TCPStoreOptions {
  std::string host_name = "127.0.0.1";
  uint16_t port = 29500;  // 0 with is_master: a free port (TCPStore::port() says which)
  std::optional<int64_t> world_size = std::nullopt;  // the master waits for this many clients
  bool is_master = false;
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  bool wait_for_workers = true;
};

class TCPStore {
 public:
  explicit TCPStore(const TCPStoreOptions& options);
  ~TCPStore();
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired);
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Whether every key is set, without waiting.
  bool check(const std::vector<std::string>& keys);
  bool delete_key(const std::string& key);
  int64_t num_keys();

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  uint16_t port() const { return port_; }
  // This process's address on the interface that reaches the server: the address other
  // ranks can reach it by.
  std::string local_host() const { return socket_.local_host(); }

 private:
  class Server;
  std::string request(const std::string& frame, std::chrono::milliseconds wait);

  std::unique_ptr<Server> server_;  // the master's
  Socket socket_;
  std::mutex mutex_;  // one request at a time on the connection
  std::chrono::milliseconds timeout_;
  uint16_t port_ = 0;
  std::string endpoint_;
};

}  // namespace kiln::dist
