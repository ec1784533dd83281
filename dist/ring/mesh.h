// Mesh: one TCP connection between every pair of ranks of a process group, set up through
// the store. The ring backend sends over two of them (to the next rank, from the previous)
// and the small-message algorithms over all.
//
// Set-up: each rank listens on a port the system picks and publishes "host:port" under
// `<prefix>addr/<rank>`, host being its address on the interface that reaches the store
// (or KILN_RING_ADDR when set). Rank r connects to every lower rank and introduces itself
// with a hello (its rank and the group's prefix); it accepts one connection from every
// higher rank. Connections are non-blocking, TCP_NODELAY, with 4 MB socket buffers.
//
// Abort: a rank whose collective failed publishes why under `<prefix>abort/<rank>` and
// closes every connection, so its peers stop at once, and their messages can say which
// rank failed first and why (abort_reason).
//
//   Mesh mesh(store, "group0/", rank, world_size, Deadline::after(timeout));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/socket.h"
#include "dist/tcp_store.h"

namespace kiln::dist {

class Mesh {
 public:
  Mesh(TCPStore& store, std::string prefix, int64_t rank, int64_t size, Deadline deadline);

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  const Socket& peer(int64_t rank) const { return peers_.at(static_cast<size_t>(rank)); }

  // Publishes `reason` (best effort) and closes every connection. Idempotent.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_; }
  // What rank `rank` published when it aborted, if it did (a rank that was killed did not,
  // and the store is gone when rank 0 is).
  std::optional<std::string> abort_reason(int64_t rank);
  // The peers whose connection has been closed by their side, looked at without waiting:
  // when a rank dies, every rank sees its connection close at about the same time, and
  // before the aborts it causes reach them, so this names the rank that died.
  std::vector<int64_t> closed_peers() const;

  static constexpr int kSocketBufferBytes = 4 << 20;

 private:
  TCPStore& store_;
  std::string prefix_;
  int64_t rank_;
  int64_t size_;
  std::vector<Socket> peers_;  // peers_[rank_] stays invalid
  bool aborted_ = false;
};

}  // namespace kiln::dist
