// The ring and direct collectives (algorithms.h; Note [Ring all-reduce]). Each builds one
// Exchange: it queues every receive and send of the collective, then runs it.
#include "dist/ring/algorithms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace kiln::dist::ring {
namespace {

int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

// Chunk c of the buffer covers elements [begin[c], begin[c + 1]).
struct Chunks {
  std::vector<int64_t> begin;
  static Chunks balanced(int64_t numel, int64_t n) { return {chunk_bounds(numel, n)}; }
};

// The slices [first, last) of elements of chunk c, each at most kSliceBytes.
std::vector<std::pair<int64_t, int64_t>> slices(const Chunks& chunks, int64_t c, size_t element_size) {
  const auto per_slice = static_cast<int64_t>(std::max<size_t>(1, kSliceBytes / element_size));
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t at = chunks.begin[c]; at < chunks.begin[c + 1]; at += per_slice)
    out.emplace_back(at, std::min(at + per_slice, chunks.begin[c + 1]));
  return out;
}

// One step of a ring: which chunk goes to the next rank, which arrives from the previous
// one, and whether the arrival is reduced in or copied in.
struct RingStep {
  int64_t send_chunk;
  int64_t recv_chunk;
  bool reduce;
};

std::vector<RingStep> reduce_scatter_steps(int64_t rank, int64_t n) {
  std::vector<RingStep> steps;
  for (int64_t s = 0; s + 1 < n; ++s) steps.push_back({wrap(rank - s - 1, n), wrap(rank - s - 2, n), true});
  return steps;
}

std::vector<RingStep> all_gather_steps(int64_t rank, int64_t n) {
  std::vector<RingStep> steps;
  for (int64_t s = 0; s + 1 < n; ++s) steps.push_back({wrap(rank - s, n), wrap(rank - s - 1, n), false});
  return steps;
}

// Runs ring steps over the buffer. A step's chunk is received in slices (reduced into
// place through one slice of scratch, or copied straight in); step t+1 sends the chunk
// step t received, slice j once slice j has arrived. With hooks, a chunk is announced
// before its first use and once its last step has delivered it (`final_steps`: the steps
// whose received chunk is then final).
void run_ring(const Collective& c, HostBuffer buffer, const Chunks& chunks,
              const std::vector<RingStep>& steps, const Reducer* reduce, const ChunkHooks* hooks = nullptr,
              const std::vector<bool>& final_steps = {}) {
  const int64_t n = c.mesh.size();
  const int64_t next = wrap(c.mesh.rank() + 1, n), prev = wrap(c.mesh.rank() - 1, n);
  Exchange exchange(c.mesh, c.header, c.timeout);
  exchange.greet(prev);  // the headers travel even when there are no bytes
  exchange.greet(next);
  std::vector<char> scratch(reduce != nullptr ? kSliceBytes + buffer.element_size : 0);
  std::vector<std::vector<size_t>> arrived(steps.size());  // per step and slice: the receive count
  for (size_t t = 0; t < steps.size(); ++t) {
    const int64_t chunk = steps[t].recv_chunk;
    const auto parts = slices(chunks, chunk, buffer.element_size);
    for (size_t j = 0; j < parts.size(); ++j) {
      const int64_t first = parts[j].first,
                    last = parts[j].second;  // (captured below: no structured binding)
      const size_t bytes = static_cast<size_t>(last - first) * buffer.element_size;
      char* into = buffer.at(first);
      const bool announce_final =
          hooks != nullptr && t < final_steps.size() && final_steps[t] && j + 1 == parts.size();
      std::function<void()> done;
      if (steps[t].reduce) {
        done = [&reduce, &scratch, hooks, into, first, last, chunk, announce_final] {
          if (hooks != nullptr) hooks->before_use(chunk);
          (*reduce)(into, scratch.data(), last - first);
          if (announce_final) hooks->chunk_final(chunk);
        };
      } else if (announce_final) {
        done = [hooks, chunk] { hooks->chunk_final(chunk); };
      }
      arrived[t].push_back(
          exchange.receive(prev, steps[t].reduce ? scratch.data() : into, bytes, std::move(done)));
    }
  }
  for (size_t t = 0; t < steps.size(); ++t) {
    const auto parts = slices(chunks, steps[t].send_chunk, buffer.element_size);
    KILN_ASSERT(t == 0 || parts.size() == arrived[t - 1].size(), "ring step ", t, " sends ", parts.size(),
                " slices but received ", arrived[t - 1].size());
    for (size_t j = 0; j < parts.size(); ++j) {
      const auto [first, last] = parts[j];
      exchange.send(next, buffer.at(first), static_cast<size_t>(last - first) * buffer.element_size,
                    t == 0 ? 0 : arrived[t - 1][j]);
    }
  }
  if (hooks != nullptr && !steps.empty()) hooks->before_use(steps[0].send_chunk);
  exchange.run();
}

// Every rank's `count` elements at each peer's offset, exchanged directly; returns the
// contributions by rank (this rank's pointing at `own`).
struct Contributions {
  std::vector<std::vector<char>> storage;
  std::vector<const char*> by_rank;
};

// Folds contributions in rank order into `out` (count elements): the same order, hence the
// same bits, on every rank.
void fold_in_rank_order(const Contributions& in, char* out, int64_t count, size_t element_size,
                        const Reducer& reduce) {
  if (count == 0) return;  // (memcpy of nothing from nowhere is still undefined)
  std::vector<char> sum(in.by_rank[0], in.by_rank[0] + static_cast<size_t>(count) * element_size);
  for (size_t r = 1; r < in.by_rank.size(); ++r) reduce(sum.data(), in.by_rank[r], count);
  std::memcpy(out, sum.data(), sum.size());
}

}  // namespace

std::vector<int64_t> chunk_bounds(int64_t numel, int64_t n) {
  std::vector<int64_t> bounds;  // the first numel % n chunks one element longer
  for (int64_t c = 0; c <= n; ++c) bounds.push_back(c * (numel / n) + std::min(c, numel % n));
  return bounds;
}

std::vector<int64_t> all_reduce_chunk_order(int64_t rank, int64_t n) {
  std::vector<int64_t> order;  // step 0 sends r-1; step t reduces into r-t-2; the last is r
  for (int64_t k = 1; k <= n; ++k) order.push_back(wrap(rank - k, n));
  return order;
}

void ring_all_reduce(const Collective& c, HostBuffer buffer, const Reducer& reduce, const ChunkHooks* hooks) {
  const int64_t n = c.mesh.size(), rank = c.mesh.rank();
  if (n == 1) return;
  std::vector<RingStep> steps = reduce_scatter_steps(rank, n);
  const std::vector<RingStep> gather = all_gather_steps(rank, n);
  steps.insert(steps.end(), gather.begin(), gather.end());
  // Final: the chunk the reduce-scatter's last step completes (this rank's own), and every
  // chunk the all-gather delivers.
  std::vector<bool> final_steps(steps.size(), false);
  for (size_t t = static_cast<size_t>(n) - 2; t < steps.size(); ++t) final_steps[t] = true;
  run_ring(c, buffer, Chunks::balanced(buffer.numel, n), steps, &reduce, hooks, final_steps);
}

void ring_reduce_scatter(const Collective& c, HostBuffer buffer, const Reducer& reduce) {
  const int64_t n = c.mesh.size();
  if (n == 1) return;
  run_ring(c, buffer, Chunks::balanced(buffer.numel, n), reduce_scatter_steps(c.mesh.rank(), n), &reduce);
}

void ring_all_gather(const Collective& c, HostBuffer buffer) {
  const int64_t n = c.mesh.size();
  if (n == 1) return;
  run_ring(c, buffer, Chunks::balanced(buffer.numel, n), all_gather_steps(c.mesh.rank(), n), nullptr);
}

void direct_all_reduce(const Collective& c, HostBuffer buffer, const Reducer& reduce) {
  const int64_t n = c.mesh.size(), rank = c.mesh.rank();
  if (n == 1) return;
  Exchange exchange(c.mesh, c.header, c.timeout);
  Contributions in{std::vector<std::vector<char>>(static_cast<size_t>(n)), {}};
  for (int64_t r = 0; r < n; ++r) {
    if (r == rank) {
      in.by_rank.push_back(buffer.data);
      continue;
    }
    in.storage[static_cast<size_t>(r)].resize(buffer.bytes());
    in.by_rank.push_back(in.storage[static_cast<size_t>(r)].data());
    exchange.receive(r, in.storage[static_cast<size_t>(r)].data(), buffer.bytes());
    exchange.send(r, buffer.data, buffer.bytes());
  }
  exchange.run();
  fold_in_rank_order(in, buffer.data, buffer.numel, buffer.element_size, reduce);
}

void direct_reduce_scatter(const Collective& c, HostBuffer buffer, const Reducer& reduce) {
  const int64_t n = c.mesh.size(), rank = c.mesh.rank();
  if (n == 1) return;
  const Chunks chunks = Chunks::balanced(buffer.numel, n);
  const int64_t count = chunks.begin[rank + 1] - chunks.begin[rank];
  Exchange exchange(c.mesh, c.header, c.timeout);
  Contributions in{std::vector<std::vector<char>>(static_cast<size_t>(n)), {}};
  for (int64_t r = 0; r < n; ++r) {
    if (r == rank) {
      in.by_rank.push_back(buffer.at(chunks.begin[rank]));
      continue;
    }
    auto& storage = in.storage[static_cast<size_t>(r)];
    storage.resize(static_cast<size_t>(count) * buffer.element_size);
    in.by_rank.push_back(storage.data());
    exchange.receive(r, storage.data(), storage.size());
    exchange.send(r, buffer.at(chunks.begin[r]),
                  static_cast<size_t>(chunks.begin[r + 1] - chunks.begin[r]) * buffer.element_size);
  }
  exchange.run();
  fold_in_rank_order(in, buffer.at(chunks.begin[rank]), count, buffer.element_size, reduce);
}

void direct_all_gather(const Collective& c, HostBuffer buffer) {
  const int64_t n = c.mesh.size(), rank = c.mesh.rank();
  if (n == 1) return;
  const Chunks chunks = Chunks::balanced(buffer.numel, n);
  const auto bytes_of = [&](int64_t r) {
    return static_cast<size_t>(chunks.begin[r + 1] - chunks.begin[r]) * buffer.element_size;
  };
  Exchange exchange(c.mesh, c.header, c.timeout);
  for (int64_t r = 0; r < n; ++r) {
    if (r == rank) continue;
    exchange.receive(r, buffer.at(chunks.begin[r]), bytes_of(r));
    exchange.send(r, buffer.at(chunks.begin[rank]), bytes_of(rank));
  }
  exchange.run();
}

void chain_broadcast(const Collective& c, HostBuffer buffer, int64_t root) {
  const int64_t n = c.mesh.size();
  if (n == 1) return;
  const int64_t position = wrap(c.mesh.rank() - root, n);  // along the chain root, root+1, ...
  const int64_t prev = wrap(c.mesh.rank() - 1, n), next = wrap(c.mesh.rank() + 1, n);
  const Chunks whole{{0, buffer.numel}};
  Exchange exchange(c.mesh, c.header, c.timeout);
  for (const auto& [first, last] : slices(whole, 0, buffer.element_size)) {
    const size_t bytes = static_cast<size_t>(last - first) * buffer.element_size;
    const size_t after = position == 0 ? 0 : exchange.receive(prev, buffer.at(first), bytes);
    if (position + 1 < n) exchange.send(next, buffer.at(first), bytes, after);
  }
  if (buffer.numel == 0) {  // the headers still travel: every rank agrees on the call
    if (position > 0) exchange.greet(prev);
    if (position + 1 < n) exchange.greet(next);
  }
  exchange.run();
}

void direct_broadcast(const Collective& c, HostBuffer buffer, int64_t root) {
  const int64_t n = c.mesh.size(), rank = c.mesh.rank();
  if (n == 1) return;
  Exchange exchange(c.mesh, c.header, c.timeout);
  if (rank == root) {
    for (int64_t r = 0; r < n; ++r)
      if (r != rank) exchange.send(r, buffer.data, buffer.bytes());
  } else {
    exchange.receive(root, buffer.data, buffer.bytes());
  }
  exchange.run();
}

void barrier(const Collective& c) {
  Exchange exchange(c.mesh, c.header, c.timeout);
  for (int64_t r = 0; r < c.mesh.size(); ++r)
    if (r != c.mesh.rank()) exchange.greet(r);
  exchange.run();
}

}  // namespace kiln::dist::ring
