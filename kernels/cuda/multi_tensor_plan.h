// Launch planning of the multi-tensor kernels (multi_tensor_apply.cuh): plain host C++,
// tested on the host (tests/cuda/internal/test_multi_tensor_plan.cpp).
//
// Each tensor is cut into chunks of kChunkSize elements, and each chunk is one block of
// kThreads threads. The addresses of the tensors travel in the kernel's arguments, in a
// TensorListMeta: for up to kMaxTensors tensors, one address per list (params, grads,
// exp_avgs, ...; lists are the `depth` dimension), the tensor's numel, and for up to
// kMaxBlocks blocks the (tensor slot, chunk) the block works on. plan_launches fills the
// struct tensor by tensor, chunk by chunk; when it runs out of tensor slots or block slots
// it hands the struct to `launch` and starts a new one (a tensor cut between two launches
// carries on in slot 0 of the next). A 3D ResNet-50's 161 tensors of 47 M values (833
// chunks) take 3 to 5 launches, depending on the depth.
//
// Note [Kernel argument budget]: kernel arguments are limited to 4 KB on every GPU and
// CUDA version we support (12.1+ on Volta+ allows 32 KB, which we do not rely on). The
// block map takes kMaxBlocks * 5 bytes, the functor (hyperparameters, amp pointers) at
// most kFunctorBytes, and the rest is shared out among the tensor slots: 8 bytes per list
// plus 8 for the numel. Deeper lists (Adam: 6 with amsgrad and step counters) get fewer
// tensors per launch than shallow ones (the norm: 1). multi_tensor_apply static_asserts
// that its arguments fit.
#pragma once

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/half.h"  // KILN_HOST_DEVICE
#include "core/tensor.h"

namespace kiln::cuda::multi_tensor {

inline constexpr int64_t kChunkSize = 65536;  // elements per block
inline constexpr int kThreads = 512;
inline constexpr int kIlp = 4;  // elements per thread per iteration
inline constexpr int kMaxBlocks = 320;
inline constexpr size_t kKernelArgBytes = 4096;  // Note [Kernel argument budget]
inline constexpr size_t kFunctorBytes = 256;
static_assert(kChunkSize % (kThreads * kIlp) == 0, "a chunk is whole iterations of the block");

// Tensor slots of a launch with `depth` lists (Note [Kernel argument budget]); at most 255
// so a block's tensor slot fits in a byte.
constexpr int max_tensors(int depth) {
  const size_t for_tensors = kKernelArgBytes - kFunctorBytes - sizeof(int64_t) -
                             kMaxBlocks * (sizeof(int32_t) + sizeof(uint8_t));
  const size_t slots = for_tensors / (depth * sizeof(void*) + sizeof(int64_t));
  return static_cast<int>(slots < 255 ? slots : 255);
}

template <int kDepth>
struct TensorListMeta {
  static constexpr int kMaxTensors = max_tensors(kDepth);
  void* addresses[kDepth][kMaxTensors];  // nullptr for a list the call does not use
  int64_t sizes[kMaxTensors];            // numel of each tensor (of list 0)
  int64_t first_block;                   // blocks of earlier launches of the same call
  int32_t block_to_chunk[kMaxBlocks];
  uint8_t block_to_tensor[kMaxBlocks];
};
static_assert(sizeof(TensorListMeta<6>) + kFunctorBytes <= kKernelArgBytes);
static_assert(sizeof(TensorListMeta<1>) + kFunctorBytes <= kKernelArgBytes);

inline int64_t chunks_of(int64_t numel) { return (numel + kChunkSize - 1) / kChunkSize; }

// Cuts the parallel lists `lists` (equal lengths, non-empty tensors; an empty list stands
// for one the call does not use and gets nullptr addresses; sizes come from lists[0])
// into launches: launch(meta, blocks) for each, in order. Blocks are numbered from
// `first_block` on (meta.first_block is the first of each launch); returns the number
// after the last, for callers that index per-block scratch.
template <int kDepth, typename Launch>
int64_t plan_launches(const std::array<const std::vector<Tensor>*, kDepth>& lists, int64_t first_block,
                      Launch&& launch) {
  using Meta = TensorListMeta<kDepth>;
  static_assert(Meta::kMaxTensors >= 1 && Meta::kMaxTensors <= 255, "tensor slots must fit a byte");
  const size_t count = lists[0]->size();
  for (const std::vector<Tensor>* list : lists) {
    KILN_ASSERT(list->empty() || list->size() == count, "multi_tensor: lists of ", count, " and ", list->size(),
                " tensors");
  }
  Meta meta{};
  meta.first_block = first_block;
  int tensors = 0, blocks = 0;
  for (size_t t = 0; t < count; ++t) {
    const int64_t numel = (*lists[0])[t].numel();
    KILN_ASSERT(numel > 0, "multi_tensor: tensor ", t, " is empty");
    for (int d = 0; d < kDepth; ++d) {
      meta.addresses[d][tensors] = lists[d]->empty() ? nullptr : (*lists[d])[t].data_ptr();
    }
    meta.sizes[tensors] = numel;
    ++tensors;
    const int64_t chunks = chunks_of(numel);
    KILN_ASSERT(chunks <= INT32_MAX, "multi_tensor: tensor ", t, " of ", numel, " elements");
    for (int64_t c = 0; c < chunks; ++c) {
      meta.block_to_tensor[blocks] = static_cast<uint8_t>(tensors - 1);
      meta.block_to_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      const bool full = blocks == kMaxBlocks || (last_chunk && tensors == Meta::kMaxTensors);
      if (!full && !(last_chunk && t == count - 1)) continue;
      launch(static_cast<const Meta&>(meta), blocks);
      meta.first_block += blocks;
      blocks = 0;
      if (last_chunk) {
        tensors = 0;
      } else {  // the tensor goes on in the next launch, from slot 0
        for (int d = 0; d < kDepth; ++d) meta.addresses[d][0] = meta.addresses[d][tensors - 1];
        meta.sizes[0] = meta.sizes[tensors - 1];
        tensors = 1;
      }
    }
  }
  return meta.first_block;
}

// ==== the walk of a chunk =======================================================================

// kIlp elements of a thread: element k sits at first + k * stride; those at or past n are
// masked. kVector: stride 1, none masked, `first` a multiple of kIlp (one vector access).
template <bool kVector>
struct Lanes {
  int64_t first, stride, n;
};

// Calls body(lanes) for every group of kIlp elements that thread `thread` of a block of
// `threads` handles in a chunk of n elements. `aligned` (every list's address in the chunk
// is a multiple of kIlp elements): adjacent groups, one vector access each, the last
// n % kIlp elements as one masked group of thread 0; otherwise groups of elements
// `threads` apart (each loaded alone, still coalesced across a warp), masked at n.
template <typename Body>
KILN_HOST_DEVICE inline void walk_chunk(unsigned thread, unsigned threads, int64_t n, bool aligned, Body&& body) {
  if (aligned) {
    const int64_t whole = n / kIlp * kIlp;
    for (int64_t i = static_cast<int64_t>(thread) * kIlp; i < whole; i += static_cast<int64_t>(threads) * kIlp) {
      body(Lanes<true>{i, 1, n});
    }
    if (thread == 0 && whole < n) body(Lanes<false>{whole, 1, n});
  } else {
    for (int64_t i = thread; i < n; i += static_cast<int64_t>(threads) * kIlp) {
      body(Lanes<false>{i, static_cast<int64_t>(threads), n});
    }
  }
}

}  // namespace kiln::cuda::multi_tensor
