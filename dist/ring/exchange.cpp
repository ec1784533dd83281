// The poll loop that moves one collective's bytes (exchange.h).
#include "dist/ring/exchange.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "core/human_bytes.h"
#include "dist/reduce_op.h"

namespace kiln::dist {
namespace {

constexpr uint32_t kMagic = 0x4B524E47;  // "KRNG"
constexpr size_t kHeaderBytes = 32;

void put(unsigned char* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

uint64_t take(const unsigned char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

void encode(const CollectiveHeader& h, unsigned char* out) {
  std::memset(out, 0, kHeaderBytes);
  put(out, kMagic, 4);
  put(out + 4, h.sequence, 4);
  out[8] = h.kind;
  out[9] = h.dtype;
  out[10] = h.op;
  put(out + 12, static_cast<uint64_t>(h.numel), 8);
  put(out + 20, static_cast<uint64_t>(h.root), 8);
}

CollectiveHeader decode(const unsigned char* in) {
  return {.sequence = static_cast<uint32_t>(take(in + 4, 4)),
          .kind = in[8],
          .dtype = in[9],
          .op = in[10],
          .numel = static_cast<int64_t>(take(in + 12, 8)),
          .root = static_cast<int64_t>(take(in + 20, 8))};
}

const char* kind_name(uint8_t kind) {
  switch (static_cast<CollectiveKind>(kind)) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::Barrier:
      return "barrier";
  }
  return "an unknown collective";
}

}  // namespace

std::string CollectiveHeader::describe() const {
  std::ostringstream out;
  out << kind_name(kind) << " #" << sequence;
  const auto k = static_cast<CollectiveKind>(kind);
  if (k == CollectiveKind::Barrier) return out.str();
  out << " (";
  if (k == CollectiveKind::AllReduce || k == CollectiveKind::ReduceScatter)
    out << reduce_op_name(static_cast<ReduceOp>(op)) << ", ";
  if (dtype < 8) out << dtype_name(static_cast<DType>(dtype)) << ", ";
  out << numel << " elements";
  if (root >= 0) out << ", root " << root;
  out << ")";
  return out.str();
}

Exchange::Exchange(Mesh& mesh, const CollectiveHeader& header, std::chrono::milliseconds timeout)
    : mesh_(mesh),
      header_(header),
      deadline_(Deadline::after(timeout)),
      timeout_(timeout),
      peers_(static_cast<size_t>(mesh.size())) {}

Exchange::Peer& Exchange::activate(int64_t rank) {
  KILN_ASSERT(rank != mesh_.rank() && rank >= 0 && rank < mesh_.size(), "exchange with rank ", rank);
  Peer& peer = peers_[static_cast<size_t>(rank)];
  if (!peer.active) {
    peer.active = true;
    encode(header_, peer.header_out);
  }
  return peer;
}

void Exchange::send(int64_t rank, const void* data, size_t n, size_t after_received) {
  Peer& peer = activate(rank);
  if (n == 0) return;
  peer.sends.push_back(
      {.data = static_cast<char*>(const_cast<void*>(data)), .size = n, .after_received = after_received});
  peer.bytes_to_send += n;
}

size_t Exchange::receive(int64_t rank, void* data, size_t n, std::function<void()> on_done) {
  Peer& peer = activate(rank);
  if (n == 0) {  // no bytes to wait for: done now (a send after it waits for the earlier ones)
    if (on_done) on_done();
    return receives_queued_;
  }
  peer.receives.push_back({.data = static_cast<char*>(data), .size = n, .on_done = std::move(on_done)});
  peer.bytes_to_receive += n;
  return ++receives_queued_;
}

void Exchange::greet(int64_t rank) { activate(rank); }

bool Exchange::finished() const {
  for (const Peer& peer : peers_)
    if (peer.active && (peer.header_sent < kHeaderBytes || peer.header_received < kHeaderBytes ||
                        !peer.sends.empty() || !peer.receives.empty()))
      return false;
  return true;
}

void Exchange::progress_send(int64_t rank, Peer& peer) {
  const Socket& socket = mesh_.peer(rank);
  try {
    while (peer.header_sent < kHeaderBytes) {
      const size_t n = socket.send_some(peer.header_out + peer.header_sent, kHeaderBytes - peer.header_sent);
      if (n == 0) return;
      peer.header_sent += n;
    }
    while (!peer.sends.empty() && peer.sends.front().after_received <= receives_completed_) {
      Segment& s = peer.sends.front();
      const size_t n = socket.send_some(s.data + s.done, s.size - s.done);
      if (n == 0) return;
      s.done += n;
      peer.bytes_sent += n;
      if (s.done == s.size) peer.sends.pop_front();
    }
  } catch (const Error& e) {
    peer_failed(rank, e.what());
  }
}

void Exchange::progress_receive(int64_t rank, Peer& peer) {
  const Socket& socket = mesh_.peer(rank);
  const auto receive_some = [&](void* into, size_t n) -> size_t {
    try {
      return socket.recv_some(into, n);
    } catch (const Error& e) {
      peer_failed(rank, e.what());
    }
  };
  while (peer.header_received < kHeaderBytes) {
    const size_t n = receive_some(peer.header_in + peer.header_received, kHeaderBytes - peer.header_received);
    if (n == 0) return;
    peer.header_received += n;
    if (peer.header_received == kHeaderBytes) check_header(rank, peer);
  }
  while (!peer.receives.empty()) {
    Segment& s = peer.receives.front();
    const size_t n = receive_some(s.data + s.done, s.size - s.done);
    if (n == 0) return;
    s.done += n;
    peer.bytes_received += n;
    if (s.done < s.size) continue;
    std::function<void()> on_done = std::move(s.on_done);
    peer.receives.pop_front();
    if (on_done) on_done();
    ++receives_completed_;
  }
}

void Exchange::check_header(int64_t rank, const Peer& peer) const {
  KILN_CHECK(take(peer.header_in, 4) == kMagic, "process group: rank ", rank,
             " sent bytes that are not a Kiln collective during ", header_.describe());
  const CollectiveHeader theirs = decode(peer.header_in);
  const CollectiveHeader& ours = header_;
  KILN_CHECK(theirs.sequence == ours.sequence && theirs.kind == ours.kind && theirs.dtype == ours.dtype &&
                 theirs.op == ours.op && theirs.numel == ours.numel && theirs.root == ours.root,
             "process group: ranks disagree on the collective: rank ", mesh_.rank(), " runs ",
             ours.describe(), " but rank ", rank, " runs ", theirs.describe(),
             " (every rank must issue the same collectives, in the same order, with the same sizes)");
}

void Exchange::peer_failed(int64_t rank, const std::string& what) {
  std::ostringstream message;
  message << "process group: " << header_.describe() << " failed on rank " << mesh_.rank() << ": rank " << rank
          << " failed: " << what;
  const std::optional<std::string> reason = mesh_.abort_reason(rank);
  if (reason) message << "; rank " << rank << " had stopped because: " << *reason;
  std::vector<int64_t> others = mesh_.closed_peers();
  std::erase(others, rank);
  if (!others.empty()) {
    message << "; these closed their connections too:";
    for (size_t i = 0; i < others.size(); ++i) message << (i ? ", rank " : " rank ") << others[i];
  }
  if (!reason)
    message << " (a closed connection: a rank died, was killed, or stopped after an error of its own)";
  KILN_CHECK(false, message.str());
  __builtin_unreachable();
}

void Exchange::timed_out() {
  std::ostringstream out;
  out << "process group: " << header_.describe() << " on rank " << mesh_.rank() << " timed out after "
      << timeout_.count() << " ms;";
  const char* separator = " still";
  for (size_t r = 0; r < peers_.size(); ++r) {
    const Peer& peer = peers_[r];
    if (!peer.active) continue;
    if (peer.header_received < kHeaderBytes || !peer.receives.empty()) {
      out << separator << " waiting for rank " << r << " (received " << human_bytes(peer.bytes_received)
          << " of " << human_bytes(peer.bytes_to_receive) << ")";
      separator = ",";
    }
    if (peer.header_sent < kHeaderBytes || !peer.sends.empty()) {
      out << separator << " sending to rank " << r << " (sent " << human_bytes(peer.bytes_sent) << " of "
          << human_bytes(peer.bytes_to_send) << ")";
      separator = ",";
    }
  }
  out << " (a rank that is stopped, stuck, or not calling this collective)";
  KILN_CHECK(false, out.str());
  __builtin_unreachable();
}

void Exchange::run() {
  std::vector<pollfd> fds;
  std::vector<int64_t> ranks;
  while (!finished()) {
    fds.clear();
    ranks.clear();
    for (int64_t r = 0; r < mesh_.size(); ++r) {
      const Peer& peer = peers_[static_cast<size_t>(r)];
      const bool sending = peer.header_sent < kHeaderBytes || !peer.sends.empty();
      const bool receiving = peer.header_received < kHeaderBytes || !peer.receives.empty();
      if (!peer.active || !(sending || receiving)) continue;  // done with this peer
      // A close matters only while traffic with the peer is pending: one that finished
      // this collective may exit before we finish ours.
      short events = POLLRDHUP;
      if (peer.header_sent < kHeaderBytes ||
          (!peer.sends.empty() && peer.sends.front().after_received <= receives_completed_))
        events |= POLLOUT;
      if (receiving) events |= POLLIN;
      fds.push_back({.fd = mesh_.peer(r).fd(), .events = events, .revents = 0});
      ranks.push_back(r);
    }
    const int n = ::poll(fds.data(), fds.size(), deadline_.remaining_ms());
    if (n < 0) {
      KILN_CHECK(errno == EINTR, "process group: poll: ", std::strerror(errno));
      continue;
    }
    if (n == 0) {
      if (deadline_.passed()) timed_out();
      continue;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      const short got = fds[i].revents;
      if (got == 0) continue;
      Peer& peer = peers_[static_cast<size_t>(ranks[i])];
      const bool reading = (fds[i].events & POLLIN) != 0;
      if (reading && (got & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) progress_receive(ranks[i], peer);
      if (got & (POLLOUT | POLLERR)) progress_send(ranks[i], peer);
      if (!reading && (got & (POLLRDHUP | POLLHUP | POLLERR)))
        peer_failed(ranks[i], "it closed its connection");
    }
  }
}

}  // namespace kiln::dist
