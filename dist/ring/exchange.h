// Exchange: the traffic of one collective between this rank and its peers, queued up
// front and then progressed by a single poll loop until every byte has moved, the
// deadline passes, or a peer fails.
//
// Per peer there is an ordered queue of sends and one of receives. A send may wait for
// data this rank has yet to receive: `after_received = k` holds it back until k receive
// segments (counted over all peers, in the order they complete) are done, and a receive
// may run a callback when it completes (the ring reduces a received slice there). That
// is all the ring needs to pipeline: slice j of step t+1 is sent as soon as slice j of
// step t has arrived and been reduced, while later slices are still on the wire.
//
// Every stream to a peer starts with a header saying which collective this is (its
// sequence number, kind, dtype, element count and root); the receiver compares it with
// its own, so ranks that call different collectives get an error naming both instead of
// exchanging garbage or hanging. A peer that closes its connection while traffic with it
// is pending is an error at once, naming it and, when it aborted, why (Mesh::abort); a
// rank that fails aborts in turn, so the failure travels around the group in moments.
//
//   Exchange exchange(mesh, header, timeout);
//   const size_t got = exchange.receive(prev, slice, bytes, [&] { reduce(slice); });
//   exchange.send(next, data, bytes, /*after_received=*/got);
//   exchange.run();
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "dist/ring/mesh.h"

namespace kiln::dist {

// What every rank says about the collective it is running (Note above).
struct CollectiveHeader {
  uint32_t sequence = 0;  // the group's collective count
  uint8_t kind = 0;       // CollectiveKind
  uint8_t dtype = 0;
  uint8_t op = 0;
  int64_t numel = 0;  // elements per rank's buffer, as the collective defines it
  int64_t root = -1;
  std::string describe() const;  // "all_reduce #12 (sum, float32, 1000 elements)"
};

enum class CollectiveKind : uint8_t { AllReduce = 1, Broadcast, AllGather, ReduceScatter, Barrier };

class Exchange {
 public:
  // The collective must finish within `timeout` from now.
  Exchange(Mesh& mesh, const CollectiveHeader& header, std::chrono::milliseconds timeout);

  // Queues n bytes to `peer` (after the queued ones). Returns nothing: sends complete
  // in order, and run() returns only when all have.
  void send(int64_t peer, const void* data, size_t n, size_t after_received = 0);
  // Queues a receive of n bytes from `peer`; returns the number of receive segments that
  // will be complete once this one is (the `after_received` that waits for it).
  size_t receive(int64_t peer, void* data, size_t n, std::function<void()> on_done = {});
  // Makes `peer` take part with a header only (a barrier's traffic).
  void greet(int64_t peer);
  void run();

 private:
  struct Segment {
    char* data = nullptr;
    size_t size = 0;
    size_t done = 0;
    size_t after_received = 0;           // sends only
    std::function<void()> on_done = {};  // receives only
  };
  struct Peer {
    std::deque<Segment> sends;
    std::deque<Segment> receives;
    bool active = false;  // exchanges a header with us in this collective
    unsigned char header_out[32];
    unsigned char header_in[32];
    size_t header_sent = 0;
    size_t header_received = 0;
    size_t bytes_sent = 0, bytes_to_send = 0, bytes_received = 0, bytes_to_receive = 0;
  };

  Peer& activate(int64_t peer);
  void progress_send(int64_t rank, Peer& peer);
  void progress_receive(int64_t rank, Peer& peer);
  void check_header(int64_t rank, const Peer& peer) const;
  [[noreturn]] void peer_failed(int64_t rank, const std::string& what);
  [[noreturn]] void timed_out();
  bool finished() const;

  Mesh& mesh_;
  CollectiveHeader header_;
  Deadline deadline_;
  std::chrono::milliseconds timeout_;
  std::vector<Peer> peers_;
  size_t receives_queued_ = 0;
  size_t receives_completed_ = 0;
};

}  // namespace kiln::dist
