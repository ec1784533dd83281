// The CPU's multi-tensor apply: one parallel loop over a whole list of tensors (Note
// [Multi-tensor kernels] in core/backend.h), the host twin of CUDA's chunked launch.
//
// The list is cut into chunks of at most kListChunk elements of one tensor; the chunks
// of all tensors form one work list that OpenMP threads share (dynamic schedule, since
// a list mixes 64-element biases with million-element weights). A kernel is a functor
// called as fn(chunk_index, chunk) and handles elements [begin, end) of tensor
// `chunk.tensor`. The chunking depends on the sizes only, never on the thread count, so a
// reduction that writes one partial per chunk index and combines them in index order
// gives the same bits with any number of threads.
//
// Also here: reading the AMP arguments of an optimizer step (AmpStepArgs) on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace kiln::cpu {

inline constexpr int64_t kListChunk = 65536;  // elements of one tensor handled as one piece

struct ListChunk {
  int64_t tensor = 0;  // index in the list
  int64_t begin = 0, end = 0;
};

// Chunks of every tensor, in list order and element order.
inline std::vector<ListChunk> chunk_list(const std::vector<Tensor>& tensors) {
  std::vector<ListChunk> chunks;
  for (int64_t i = 0; i < static_cast<int64_t>(tensors.size()); ++i) {
    const int64_t n = tensors[static_cast<size_t>(i)].numel();
    for (int64_t begin = 0; begin < n; begin += kListChunk) {
      chunks.push_back({.tensor = i, .begin = begin, .end = std::min(n, begin + kListChunk)});
    }
  }
  return chunks;
}

// Runs fn(chunk_index, chunk) for every chunk, in parallel when there is enough work.
// fn must not throw (resolve dtypes and check arguments before calling this).
template <typename Fn>
void multi_tensor_apply(const std::vector<ListChunk>& chunks, const Fn& fn) {
  const int64_t count = static_cast<int64_t>(chunks.size());
  int64_t elements = 0;
  for (const ListChunk& c : chunks) elements += c.end - c.begin;
  if (elements <= kListChunk) {
    for (int64_t k = 0; k < count; ++k) fn(k, chunks[static_cast<size_t>(k)]);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t k = 0; k < count; ++k) fn(k, chunks[static_cast<size_t>(k)]);
}

// The AMP arguments of an optimizer step, read on the host: skip = found_inf defined and
// non-zero (the step writes nothing); inv_scale = 1 when undefined.
struct AmpValues {
  bool skip = false;
  float inv_scale = 1.0f;
};

inline AmpValues read_amp_args(const Backend::AmpStepArgs& amp) {
  AmpValues values;
  if (amp.found_inf.defined()) values.skip = amp.found_inf.data_ptr<float>()[0] != 0.0f;
  if (amp.inv_scale.defined()) values.inv_scale = amp.inv_scale.data_ptr<float>()[0];
  return values;
}

}  // namespace kiln::cpu
