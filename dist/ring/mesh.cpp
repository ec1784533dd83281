// The full mesh of connections of a process group (mesh.h): addresses through the store,
// lower ranks accept, higher ranks connect and say hello.
#include "dist/ring/mesh.h"

#include <poll.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace kiln::dist {
namespace {

// The first frame on every connection: who is calling, and for which group.
std::string hello(int64_t rank, const std::string& prefix) { return std::to_string(rank) + "@" + prefix; }

std::string advertised_host(TCPStore& store) {
  if (const char* chosen = std::getenv("KILN_RING_ADDR"); chosen != nullptr && *chosen != '\0') return chosen;
  return store.local_host();
}

// "host:port" -> {host, port}; IPv6 hosts contain colons, so the port follows the last.
std::pair<std::string, uint16_t> split_endpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  KILN_CHECK(colon != std::string::npos, "process group: malformed peer address '", endpoint, "'");
  return {endpoint.substr(0, colon),
          static_cast<uint16_t>(std::strtoul(endpoint.c_str() + colon + 1, nullptr, 10))};
}

}  // namespace

Mesh::Mesh(TCPStore& store, std::string prefix, int64_t rank, int64_t size, Deadline deadline)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), size_(size), peers_(static_cast<size_t>(size)) {
  if (size_ == 1) return;
  const Socket listener = Socket::listen("", 0);
  const std::string host = advertised_host(store_);
  store_.set(prefix_ + "addr/" + std::to_string(rank_), host + ":" + std::to_string(listener.port()));
  for (int64_t lower = 0; lower < rank_; ++lower) {
    const std::string key = prefix_ + "addr/" + std::to_string(lower);
    store_.wait({key});
    const auto [peer_host, peer_port] = split_endpoint(store_.get(key));
    Socket socket = Socket::connect(peer_host, peer_port, deadline);
    socket.set_peer_name("rank " + std::to_string(lower) + " (" + socket.peer() + ")");
    socket.send_frame(hello(rank_, prefix_), deadline);
    peers_[static_cast<size_t>(lower)] = std::move(socket);
  }
  for (int64_t accepted = rank_ + 1; accepted < size_; ++accepted) {
    Socket socket = listener.accept(deadline);
    KILN_CHECK(socket.valid(), "process group: rank ", rank_, " accepted ", accepted - rank_ - 1, " of the ",
               size_ - rank_ - 1, " connections from higher ranks before the timeout");
    const std::string greeting = socket.recv_frame(deadline);
    const size_t at = greeting.find('@');
    const int64_t higher = at == std::string::npos ? -1 : std::strtoll(greeting.c_str(), nullptr, 10);
    KILN_CHECK(at != std::string::npos && greeting.substr(at + 1) == prefix_ && higher > rank_ &&
                   higher < size_ && !peers_[static_cast<size_t>(higher)].valid(),
               "process group: an unexpected connection from ", socket.peer(), " introduced itself as '",
               greeting, "'");
    socket.set_peer_name("rank " + std::to_string(higher) + " (" + socket.peer() + ")");
    peers_[static_cast<size_t>(higher)] = std::move(socket);
  }
  for (const Socket& socket : peers_)
    if (socket.valid()) socket.set_buffer_sizes(kSocketBufferBytes);
}

void Mesh::abort(const std::string& reason) {
  if (aborted_) return;
  aborted_ = true;
  try {
    store_.set(prefix_ + "abort/" + std::to_string(rank_), reason);
  } catch (const Error&) {
    // The store may be gone too (rank 0 died); closing the connections still tells the peers.
  }
  for (Socket& socket : peers_) socket.close();
}

std::optional<std::string> Mesh::abort_reason(int64_t rank) {
  const std::string key = prefix_ + "abort/" + std::to_string(rank);
  try {
    if (store_.check({key})) return store_.get(key);
  } catch (const Error&) {
  }
  return std::nullopt;
}

std::vector<int64_t> Mesh::closed_peers() const {
  std::vector<pollfd> fds;
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < size_; ++r) {
    if (!peers_[static_cast<size_t>(r)].valid()) continue;
    fds.push_back({.fd = peers_[static_cast<size_t>(r)].fd(), .events = POLLRDHUP, .revents = 0});
    ranks.push_back(r);
  }
  std::vector<int64_t> closed;
  if (::poll(fds.data(), fds.size(), 0) <= 0) return closed;
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) closed.push_back(ranks[i]);
  return closed;
}

}  // namespace kiln::dist
