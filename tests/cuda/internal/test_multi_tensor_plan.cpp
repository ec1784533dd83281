// The launch planning of the multi-tensor kernels (kernels/cuda/multi_tensor_plan.h) on
// the host: every chunk of every tensor goes to exactly one block, in list order; no
// launch holds more tensors or blocks than its kernel argument has slots for; a tensor cut
// between launches carries on with the right chunk numbers; every list's addresses (or
// nullptr for an unused list) follow their tensor; blocks are numbered across launches.
// Then the kernel side, on the host: every thread of every planned block walks its chunk
// (walk_chunk, as multi_tensor_kernel and for_each_lane_group do on the device), for
// random lists whose tensors start aligned or not, and every element of every tensor is
// visited exactly once, vector groups only where every list's address is aligned.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "bench/resnet50_params.h"
#include "core/ops.h"
#include "kernels/cuda/multi_tensor_plan.h"

namespace kiln::cuda::multi_tensor {
namespace {

// One list of 1-d UInt8 tensors (the plan only looks at numel and addresses).
std::vector<Tensor> list_of(const std::vector<int64_t>& sizes) {
  std::vector<Tensor> list;
  for (int64_t n : sizes) list.push_back(empty({n}, {.dtype = DType::UInt8}));
  return list;
}

struct Launch {
  int tensors_used = 0;  // highest slot referenced + 1
  int blocks = 0;
  int64_t first_block = 0;
};

// Plans `lists`, checks each launch against the lists, and returns the launches.
template <int kDepth>
std::vector<Launch> checked_plan(const std::array<const std::vector<Tensor>*, kDepth>& lists, int64_t first_block = 0) {
  const std::vector<Tensor>& tensors = *lists[0];
  std::vector<std::pair<size_t, int64_t>> expected, seen;  // (tensor, chunk) in order
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (int64_t c = 0; c < chunks_of(tensors[t].numel()); ++c) expected.emplace_back(t, c);
  }
  std::vector<Launch> launches;
  size_t next = 0;  // the tensor the next block should be in, found by its address
  const int64_t end = plan_launches<kDepth>(lists, first_block, [&](const TensorListMeta<kDepth>& meta, int blocks) {
    EXPECT_GE(blocks, 1);
    EXPECT_LE(blocks, kMaxBlocks);
    EXPECT_EQ(meta.first_block, launches.empty() ? first_block : launches.back().first_block + launches.back().blocks);
    Launch launch{.tensors_used = 0, .blocks = blocks, .first_block = meta.first_block};
    for (int b = 0; b < blocks; ++b) {
      const int slot = meta.block_to_tensor[b];
      ASSERT_LT(slot, TensorListMeta<kDepth>::kMaxTensors);
      launch.tensors_used = std::max(launch.tensors_used, slot + 1);
      while (next < tensors.size() && meta.addresses[0][slot] != tensors[next].data_ptr()) ++next;
      ASSERT_LT(next, tensors.size()) << "block " << b << " points at no tensor of the list";
      EXPECT_EQ(meta.sizes[slot], tensors[next].numel());
      for (int d = 1; d < kDepth; ++d) {
        const void* want = lists[d]->empty() ? nullptr : (*lists[d])[next].data_ptr();
        EXPECT_EQ(meta.addresses[d][slot], want) << "list " << d << ", tensor " << next;
      }
      seen.emplace_back(next, meta.block_to_chunk[b]);
    }
    launches.push_back(launch);
  });
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(end, first_block + static_cast<int64_t>(expected.size()));
  return launches;
}

TEST(MultiTensorPlan, OddSizesOneLaunch) {
  const std::vector<Tensor> a = list_of({1, 3, 65537, 200000, 7, 65536, 4099}), b = list_of({1, 3, 65537, 200000, 7, 65536, 4099});
  const std::vector<Tensor> none;
  const std::vector<Launch> launches = checked_plan<3>({&a, &none, &b}, 5);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].blocks, 1 + 1 + 2 + 4 + 1 + 1 + 1);
  EXPECT_EQ(launches[0].tensors_used, 7);
}

// More tensors than slots: a new launch when the slots are full, after the last chunk
// of the tensor in the last slot.
TEST(MultiTensorPlan, TensorSlotsOverflow) {
  constexpr int kSlots = TensorListMeta<6>::kMaxTensors;
  std::vector<int64_t> sizes;
  for (int i = 0; i < 2 * kSlots + 3; ++i) sizes.push_back(i % 4 == 0 ? 65537 : 1 + i);
  const std::vector<Tensor> l0 = list_of(sizes), l1 = list_of(sizes), l2 = list_of(sizes), l3 = list_of(sizes);
  const std::vector<Tensor> none, steps = list_of(std::vector<int64_t>(sizes.size(), 1));
  const std::vector<Launch> launches = checked_plan<6>({&l0, &l1, &l2, &l3, &none, &steps});
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].tensors_used, kSlots);
  EXPECT_EQ(launches[1].tensors_used, kSlots);
  EXPECT_EQ(launches[2].tensors_used, 3);
}

// More chunks than blocks: one tensor of 700 chunks goes over three launches, carried
// on in slot 0, with its chunk numbers continuing.
TEST(MultiTensorPlan, BlockSlotsOverflowInsideATensor) {
  const std::vector<Tensor> big = list_of({3, 700 * kChunkSize - 5, 9});
  const std::vector<Launch> launches = checked_plan<1>({&big});
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].blocks, kMaxBlocks);
  EXPECT_EQ(launches[1].blocks, kMaxBlocks);
  EXPECT_EQ(launches[2].blocks, 1 + 700 + 1 - 2 * kMaxBlocks);
  EXPECT_EQ(launches[1].tensors_used, 1);  // only the big tensor, in slot 0
  EXPECT_EQ(launches[2].tensors_used, 2);
}

// A tensor that ends exactly where the blocks run out starts no empty launch, and the
// next tensor starts in slot 0.
TEST(MultiTensorPlan, BlocksFullAtATensorsEnd) {
  const std::vector<Tensor> l = list_of({kMaxBlocks * kChunkSize, 1});
  const std::vector<Launch> launches = checked_plan<2>({&l, &l});
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[1].blocks, 1);
  EXPECT_EQ(launches[1].tensors_used, 1);
}

TEST(MultiTensorPlan, EmptyListPlansNothing) {
  const std::vector<Tensor> none;
  int calls = 0;
  EXPECT_EQ(plan_launches<1>({&none}, 4, [&](const TensorListMeta<1>&, int) { ++calls; }), 4);
  EXPECT_EQ(calls, 0);
}

// A 3D ResNet-50 Adam step (depth 6: 161 tensors, ~47 M values) is a handful of launches.
TEST(MultiTensorPlan, ResNet50AdamIsAHandfulOfLaunches) {
  std::vector<int64_t> sizes;
  for (const std::vector<int64_t>& shape : bench::resnet3d50_param_shapes()) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    sizes.push_back(n);
  }
  const std::vector<Tensor> p = list_of(sizes);
  const std::vector<Tensor> steps = list_of(std::vector<int64_t>(sizes.size(), 1));
  const std::vector<Launch> launches = checked_plan<6>({&p, &p, &p, &p, &p, &steps});
  EXPECT_LE(launches.size(), 6u);
}

// ==== the walk of the chunks ====================================================================

// Random lists for the walk: tensor i of list d has the same numel in every list and
// starts 0 to 3 elements past an aligned address (the Mixed placement of the CUDA tests,
// at random), in a dtype of 2, 4 or 8 bytes per list (multi_tensor_scale's src and dst
// differ). Sizes: tiny, around one and two chunks (+-1), and up to several chunks.
struct WalkLists {
  std::vector<std::vector<Tensor>> lists;
  std::vector<Tensor> buffers;  // the allocations the views live in
};

WalkLists random_lists(int depth, int count, std::mt19937_64& rng) {
  const DType kDTypes[] = {DType::Float16, DType::Float32, DType::Float64};
  std::vector<int64_t> sizes;
  for (int t = 0; t < count; ++t) {
    switch (rng() % 4) {
      case 0: sizes.push_back(1 + static_cast<int64_t>(rng() % 9)); break;
      case 1: sizes.push_back(kChunkSize * (1 + static_cast<int64_t>(rng() % 2)) - 1 + static_cast<int64_t>(rng() % 3)); break;
      default: sizes.push_back(1 + static_cast<int64_t>(rng() % (3 * kChunkSize))); break;
    }
  }
  WalkLists w;
  for (int d = 0; d < depth; ++d) {
    const DType dtype = kDTypes[rng() % 3];
    std::vector<Tensor> list;
    for (int64_t n : sizes) {
      const int64_t shift = rng() % 2 == 0 ? 0 : static_cast<int64_t>(rng() % 4);
      const Tensor buffer = empty({n + 4}, {.dtype = dtype});
      w.buffers.push_back(buffer);
      list.push_back(buffer.narrow(0, shift, n));
    }
    w.lists.push_back(list);
  }
  return w;
}

// What the walks of one call did.
struct WalkCounts {
  int64_t vector_chunks = 0, scalar_chunks = 0;
};

// Plans `w` and walks every block of every launch with every thread; checks each element
// is visited once and each vector group is whole, in range and aligned in every list.
template <int kDepth>
WalkCounts walk_every_thread(const WalkLists& w) {
  std::array<const std::vector<Tensor>*, kDepth> lists;
  for (int d = 0; d < kDepth; ++d) lists[d] = &w.lists[d];
  const std::vector<Tensor>& tensors = w.lists[0];
  std::vector<std::vector<uint8_t>> visits;
  for (const Tensor& t : tensors) visits.emplace_back(static_cast<size_t>(t.numel()), 0);
  WalkCounts counts;
  plan_launches<kDepth>(lists, 0, [&](const TensorListMeta<kDepth>& meta, int blocks) {
    for (int b = 0; b < blocks; ++b) {
      // The block's chunk, as multi_tensor_kernel finds it.
      const int slot = meta.block_to_tensor[b];
      const int64_t begin = static_cast<int64_t>(meta.block_to_chunk[b]) * kChunkSize;
      const int64_t n = std::min(meta.sizes[slot] - begin, kChunkSize);
      size_t t = 0;
      while (t < tensors.size() && tensors[t].data_ptr() != meta.addresses[0][slot]) ++t;
      ASSERT_LT(t, tensors.size());
      ASSERT_GE(n, 1);
      // Whether every list's chunk is aligned for vectors, as the functors decide it.
      std::array<uintptr_t, kDepth> chunk_address;
      std::array<size_t, kDepth> element_size;
      bool aligned = true;
      for (int d = 0; d < kDepth; ++d) {
        element_size[d] = itemsize(w.lists[d][t].dtype());
        chunk_address[d] = reinterpret_cast<uintptr_t>(meta.addresses[d][slot]) + static_cast<uintptr_t>(begin) * element_size[d];
        aligned = aligned && chunk_address[d] % (element_size[d] * kIlp) == 0;
      }
      ++(aligned ? counts.vector_chunks : counts.scalar_chunks);
      std::vector<uint8_t>& seen = visits[t];
      for (unsigned thread = 0; thread < static_cast<unsigned>(kThreads); ++thread) {
        walk_chunk(thread, kThreads, n, aligned, [&]<bool kVector>(Lanes<kVector> lanes) {
          EXPECT_EQ(lanes.n, n);
          if constexpr (kVector) {
            ASSERT_TRUE(aligned);
            ASSERT_EQ(lanes.first % kIlp, 0);
            ASSERT_LE(lanes.first + kIlp, n);
            for (int d = 0; d < kDepth; ++d) {
              ASSERT_EQ((chunk_address[d] + static_cast<uintptr_t>(lanes.first) * element_size[d]) % (element_size[d] * kIlp), 0u)
                  << "misaligned vector access in list " << d;
            }
          }
          for (int k = 0; k < kIlp; ++k) {
            const int64_t i = lanes.first + (kVector ? k : k * lanes.stride);
            ASSERT_GE(i, 0);
            if (i < n) ++seen[static_cast<size_t>(begin + i)];
          }
        });
      }
    }
  });
  for (size_t t = 0; t < visits.size(); ++t) {
    const auto wrong = std::find_if(visits[t].begin(), visits[t].end(), [](uint8_t v) { return v != 1; });
    EXPECT_TRUE(wrong == visits[t].end()) << "tensor " << t << " of " << visits[t].size() << " elements: element "
                                          << (wrong - visits[t].begin()) << " visited " << int(wrong == visits[t].end() ? 1 : *wrong)
                                          << " times";
  }
  return counts;
}

TEST(MultiTensorPlan, EveryThreadWalkVisitsEveryElementOnce) {
  std::mt19937_64 rng(20261123);
  WalkCounts total;
  for (int round = 0; round < 6; ++round) {
    const int count = 1 + static_cast<int>(rng() % 60);
    const WalkCounts one = walk_every_thread<1>(random_lists(1, count, rng));
    const WalkCounts two = walk_every_thread<2>(random_lists(2, count, rng));
    const WalkCounts six = walk_every_thread<6>(random_lists(6, count, rng));
    total.vector_chunks += one.vector_chunks + two.vector_chunks + six.vector_chunks;
    total.scalar_chunks += one.scalar_chunks + two.scalar_chunks + six.scalar_chunks;
  }
  EXPECT_GT(total.vector_chunks, 0);  // both paths taken
  EXPECT_GT(total.scalar_chunks, 0);
}

// A chunk of fewer than kIlp elements, aligned: no vector group, thread 0's masked group.
TEST(MultiTensorPlan, ShortAlignedChunkIsOneMaskedGroupOfThreadZero) {
  for (unsigned thread = 0; thread < static_cast<unsigned>(kThreads); ++thread) {
    int groups = 0;
    walk_chunk(thread, kThreads, 3, true, [&]<bool kVector>(Lanes<kVector> lanes) {
      EXPECT_FALSE(kVector);
      EXPECT_EQ(lanes.first, 0);
      EXPECT_EQ(lanes.stride, 1);
      ++groups;
    });
    EXPECT_EQ(groups, thread == 0 ? 1 : 0) << "thread " << thread;
  }
}

}  // namespace
}  // namespace kiln::cuda::multi_tensor
