// The collective algorithms of the ring backend, on host buffers: the ring (bandwidth-
// optimal, for large messages) and direct exchanges (one round trip, for small ones).
// ProcessGroupRing stages tensors into host buffers and picks the algorithm by size.
//
// Note [Ring all-reduce]: N ranks each hold a buffer of S bytes and want the elementwise
// reduction of all N. Split each buffer into N chunks of S/N bytes and arrange the ranks
// in a ring, each sending only to the next and receiving only from the previous.
//   Reduce-scatter, N-1 steps: in step s, rank r sends chunk (r-s-1) mod N and receives
//   chunk (r-s-2) mod N, which it reduces into its own copy. A chunk thus travels the ring
//   picking up one contribution per hop; after N-1 steps rank r holds chunk r reduced
//   over all N ranks.
//   All-gather, N-1 steps: in step s, rank r sends chunk (r-s) mod N, received from the
//   previous rank in the step before (or its own at s = 0), and receives chunk (r-s-1),
//   copying it in place. After N-1 steps every rank holds every reduced chunk.
// Each rank sends 2(N-1) chunks of S/N bytes, 2(N-1)/N * S bytes in all, whatever N: the
// lower bound, since every rank's S bytes must leave it once for the reduction and the
// result must reach it once (each link carries about 2S, no link more than another).
// With link bandwidth B the time is 2(N-1)/N * S/B + 2(N-1) * latency, which is why
// nccl-tests report "bus bandwidth" = S * 2(N-1)/N / time: comparable across N, and at
// best the link's bandwidth. The 2(N-1) latency terms are why small messages use a direct
// exchange instead: every rank sends its whole buffer to every other, one round trip,
// (N-1) * S bytes out, which costs little when S is small.
//
// Pipelining: a step's chunk is sent in slices (kSliceBytes), and slice j of step s+1 goes
// out as soon as slice j of step s has arrived and been reduced (Exchange's
// after_received), so the network never waits for a whole chunk's reduction and the
// reduction of one slice overlaps the transfer of the next.
//
// Every rank reduces in the same order (the ring's, or rank order in the direct
// exchange), so every rank ends with the same bits, which DDP relies on: replicas that
// drift apart by a rounding error would not stay replicas.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "dist/ring/exchange.h"
#include "dist/ring/mesh.h"

namespace kiln::dist::ring {

// `numel` elements of `element_size` bytes at `data`, in host memory.
struct HostBuffer {
  char* data;
  int64_t numel;
  size_t element_size;
  char* at(int64_t element) const { return data + static_cast<size_t>(element) * element_size; }
  size_t bytes() const { return static_cast<size_t>(numel) * element_size; }
};

// dst[i] = dst[i] (op) src[i] for i < count: the collective's reduction.
using Reducer = std::function<void(void* dst, const void* src, int64_t count)>;

// Everything an algorithm needs besides its buffers.
struct Collective {
  Mesh& mesh;
  CollectiveHeader header;
  std::chrono::milliseconds timeout;
};

constexpr size_t kSliceBytes = 256 << 10;

// The ring's chunks of a buffer of `numel` elements over n ranks: chunk c is elements
// [bounds[c], bounds[c + 1]), n nearly equal parts.
std::vector<int64_t> chunk_bounds(int64_t numel, int64_t n);

// For a buffer staged from elsewhere (a GPU tensor, Note [Overlapped staging] in
// host_stage.cpp): before_use(c) runs before the ring first reads or reduces into chunk
// c, chunk_final(c) once chunk c holds its final value.
struct ChunkHooks {
  std::function<void(int64_t chunk)> before_use;
  std::function<void(int64_t chunk)> chunk_final;
};

// The chunks of ring_all_reduce in the order it first needs them on `rank`.
std::vector<int64_t> all_reduce_chunk_order(int64_t rank, int64_t n);

void ring_all_reduce(const Collective& c, HostBuffer buffer, const Reducer& reduce,
                     const ChunkHooks* hooks = nullptr);
void direct_all_reduce(const Collective& c, HostBuffer buffer, const Reducer& reduce);
// `buffer` holds N chunks of buffer.numel / N elements; afterwards chunk `rank` is the
// reduction over all ranks (the other chunks are scratch).
void ring_reduce_scatter(const Collective& c, HostBuffer buffer, const Reducer& reduce);
void direct_reduce_scatter(const Collective& c, HostBuffer buffer, const Reducer& reduce);
// `buffer` holds N chunks with this rank's own at chunk `rank`; afterwards all of them.
void ring_all_gather(const Collective& c, HostBuffer buffer);
void direct_all_gather(const Collective& c, HostBuffer buffer);
// Root's buffer to every rank: a pipelined chain along the ring, or direct from the root.
void chain_broadcast(const Collective& c, HostBuffer buffer, int64_t root);
void direct_broadcast(const Collective& c, HostBuffer buffer, int64_t root);
// Returns once every rank has entered it.
void barrier(const Collective& c);

}  // namespace kiln::dist::ring
