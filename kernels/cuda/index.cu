// CudaBackend's index kernels: gather, index_select and scatter_add.
//
// Math (shown for dim 0 of a 3-d tensor; the other dims alike), as kernels/cpu/index.cpp:
//   gather:       out[i][j][k]  = in[index[i][j][k]][j][k]     out overwritten (=)
//   index_select: out[i][j][k]  = in[index[i]][j][k]           out overwritten (=)
//   scatter_add:  out[index[i][j][k]][j][k] += src[i][j][k]    out accumulated (+=)
// Layout: any strides on every operand (operands of one rank >= 1, the index no larger
// than the others outside dim: core/ops/index.cpp). As on the CPU, the indexed operand
// (gather's `in`, scatter_add's `out`) is walked through its "row 0" (stride 0 along dim,
// over the index's sizes) and the kernel adds index * stride(dim); index_select is a
// gather whose 1-d index is laid along dim with stride 0 elsewhere.
//
// Launch: one thread per index element, 256-thread blocks, a grid of at most 8 blocks per
// SM with a grid-stride loop; offsets from the OffsetCalculator over a 32-bit linear
// index, the walk split into pieces below 2^31 elements on the host (index_plan.h).
// gather and index_select only move elements, so they are instantiated per element size
// (1, 2, 4, 8 bytes), not per dtype: four kernels serve all eight dtypes.
//
// scatter_add adds with atomics: every (out element, contribution) pair is one atomicAdd,
// native for float, double, int32, int64 (as unsigned 64-bit: two's complement wraps
// like the CPU's), Half (sm_70+) and BFloat16 (sm_80+); uint8 has no byte atomic, so it is
// a compare-and-swap loop on the aligned 32-bit word holding the byte. Integer sums are
// exact and equal the CPU's; floating sums happen in whatever order the atomics land, so
// they may differ from the CPU's (and from run to run) by rounding: nondeterministic, as
// PyTorch's scatter_add_ on CUDA. Half/BFloat16 atomics add in their own precision (one
// rounding per add, as the CPU's round-on-every-store).
//
// Bounds: Note [Index bounds on the device].
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <optional>

#include "core/deferred_check.h"
#include "core/dispatch.h"
#include "core/host_sync.h"
#include "core/kernel_memory.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/index_plan.h"
#include "kernels/cuda/launch.h"

namespace kiln::cuda {
namespace {

// Note [Index bounds on the device]
// An index outside [0, size) must become a kiln::Error ("gather: index 7 is out of bounds
// for dimension 0 with size 5"), as on the CPU. A device-side assert (PyTorch's choice)
// cannot do that: it poisons the CUDA context, and every later call in the process fails.
// So a kernel never dereferences a bad index: it skips it and records it in a 16-byte
// flag on the device (the first thread to win an atomicCAS on `seen` writes its value).
// After the kernel, the host copies the flag back and throws if it was set.
// The cost: reading the flag waits for the stream (a synchronize per call, a few
// microseconds plus whatever work was queued before), so these ops do not overlap with
// the host the way other kernels do (a training loop defers the read-back to its log
// interval: Note [Deferred index checks] in core/deferred_check.h). Correctness wins: a silent out-of-bounds read or
// write on the GPU corrupts memory or kills the context, and an embedding lookup with a
// bad token id is one of the commonest mistakes a user makes. The backward passes pay
// nothing: they reuse indices their forward already checked (IndexBounds::Checked, Note
// [Checked indices] in core/backend.h), so a training step syncs once per index op, in
// its forward.
struct BadIndexFlag {
  unsigned long long seen;
  long long value;
};

__device__ __forceinline__ void record_bad_index(BadIndexFlag* flag, int64_t value) {
  if (atomicCAS(&flag->seen, 0ull, 1ull) == 0ull) flag->value = static_cast<long long>(value);
}

// The flag of one call: zeroed on `stream` before the kernel, read back after it. During a
// CUDA graph capture the flag is a slot of the graph's flags instead (Note [Index checks
// in a CUDA graph] in core/deferred_check.h): zeroed before the capture, never by the
// graph, so it keeps whatever any replay found. Its check runs after the replays (the
// graph's closure has waited for the stream they were launched on), on the stream current
// then: the capture's own stream may be gone.
class DeviceBadIndex {
 public:
  DeviceBadIndex(int device, Stream stream, const char* op) : stream_(stream) {
    buffer_ = captured_index_flag(Device::cuda(device), op);
    captured_ = buffer_.defined();
    if (captured_) return;
    buffer_ = allocate_tensor({2}, DType::Int64, Device::cuda(device));
    KILN_CUDA_CHECK(cudaMemsetAsync(flag(), 0, sizeof(BadIndexFlag), stream_.handle()));
  }
  BadIndexFlag* flag() const { return static_cast<BadIndexFlag*>(buffer_.data_ptr()); }

  // Waits for the stream (a captured flag: the current one), then throws the CPU's message
  // if a kernel recorded a bad index.
  void throw_if_seen(const char* op, int64_t dim, int64_t size) const {
    BadIndexFlag host{};
    note_host_sync(HostSync::IndexCheck, Device::cuda(stream_.device()));
    const Stream read_on = captured_ ? current_stream(stream_.device()) : stream_;
    KILN_CUDA_CHECK(cudaMemcpyAsync(&host, flag(), sizeof(host), cudaMemcpyDeviceToHost, read_on.handle()));
    read_on.synchronize();
    KILN_CHECK(host.seen == 0, op, ": index ", host.value, " is out of bounds for dimension ", dim, " with size ",
               size);
  }

 private:
  Tensor buffer_;
  Stream stream_;
  bool captured_ = false;
};

// ---- kernels -------------------------------------------------------------------------------

// A grid-stride loop of 8 blocks per SM: every SM full, the loop strides the rest.
inline constexpr int64_t kGridStrideBlocksPerSm = 8;

// Operands (for both ops): 0 = the written/read element, 1 = index, 2 = the other.

// The loop both ops share: for each element p of the walk, j = index[p]; a j outside
// [0, size) is skipped and recorded (Note [Index bounds on the device]), otherwise
// element(offset of operand 0, offset of operand 2, j) does the op's work.
template <typename Element>
__global__ void index_kernel(const int64_t* index, OffsetCalculator<3> offsets, int64_t size, int64_t n,
                             BadIndexFlag* bad, Element element) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto o = offsets.get(static_cast<uint32_t>(i));
    const int64_t j = index[o[1]];
    if (j < 0 || j >= size) {
      if (bad != nullptr) record_bad_index(bad, j);
      continue;
    }
    element(o[0], o[2], j);
  }
}

// gather / index_select: out[p] = in_rows[p + j * in_step]. Word: an unsigned type of the
// element's size.
template <typename Word>
struct GatherElement {
  Word* out;
  const Word* in_rows;
  int64_t in_step;
  __device__ void operator()(int64_t out_offset, int64_t in_offset, int64_t j) const {
    out[out_offset] = in_rows[in_offset + j * in_step];
  }
};

// *target += value, atomically (see the header for each dtype).
__device__ __forceinline__ void atomic_add(float* target, float value) { atomicAdd(target, value); }
__device__ __forceinline__ void atomic_add(double* target, double value) { atomicAdd(target, value); }
__device__ __forceinline__ void atomic_add(int32_t* target, int32_t value) { atomicAdd(target, value); }
__device__ __forceinline__ void atomic_add(int64_t* target, int64_t value) {
  static_assert(sizeof(int64_t) == sizeof(unsigned long long));
  atomicAdd(reinterpret_cast<unsigned long long*>(target), static_cast<unsigned long long>(value));
}
__device__ __forceinline__ void atomic_add(Half* target, Half value) {
  atomicAdd(reinterpret_cast<__half*>(target), __ushort_as_half(value.bits));
}
__device__ __forceinline__ void atomic_add(BFloat16* target, BFloat16 value) {
  atomicAdd(reinterpret_cast<__nv_bfloat16*>(target), __ushort_as_bfloat16(value.bits));
}
// No byte atomics: swap the aligned word holding the byte, with only that byte changed;
// the swap succeeds only if no other thread changed the word meanwhile, else retry. The
// word lies inside the tensor's allocation (Note [Sub-word atomics], caching_allocator.cpp).
__device__ __forceinline__ void atomic_add(uint8_t* target, uint8_t value) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(target);
  unsigned int* word = reinterpret_cast<unsigned int*>(address & ~uintptr_t{3});
  const unsigned int shift = static_cast<unsigned int>(address & 3) * 8;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int sum = ((assumed >> shift) + value) & 0xffu;
    old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (sum << shift));
  } while (old != assumed);
}

// scatter_add: out_rows[p + j * out_step] += src[p].
template <typename T>
struct ScatterAddElement {
  T* out_rows;
  const T* src;
  int64_t out_step;
  __device__ void operator()(int64_t out_offset, int64_t src_offset, int64_t j) const {
    atomic_add(out_rows + out_offset + j * out_step, src[src_offset]);
  }
};

// ---- launchers ------------------------------------------------------------------------------

// `t`'s strides with 0 along dim: the walk visits its row 0 (the kernel adds the index).
std::vector<int64_t> row_zero_strides(const Tensor& t, int64_t dim) {
  std::vector<int64_t> strides = t.strides();
  strides[dim] = 0;
  return strides;
}

// The kernels' three operands over `sizes`: the written operand, the index, the read one.
index_plan::StridedOperands<3> operands(const std::vector<int64_t>& sizes, const Tensor& a,
                                        std::vector<int64_t> a_strides, const Tensor& index,
                                        std::vector<int64_t> index_strides, const Tensor& b,
                                        std::vector<int64_t> b_strides) {
  index_plan::StridedOperands<3> ops;
  ops.sizes = sizes;
  ops.data = {static_cast<char*>(a.data_ptr()), static_cast<char*>(index.data_ptr()),
              static_cast<char*>(b.data_ptr())};
  ops.strides = {std::move(a_strides), std::move(index_strides), std::move(b_strides)};
  ops.element_sizes = {static_cast<int64_t>(a.element_size()), static_cast<int64_t>(index.element_size()),
                       static_cast<int64_t>(b.element_size())};
  return ops;
}

// Runs index_kernel over `ops` on the current stream of `device`, in pieces of at most
// 2^31 - 1 elements (index_plan.h), then throws the CPU's error if an index was outside
// [0, size). element_of(piece) is the op's per-element functor for the piece's addresses.
// With IndexBounds::Checked (Note [Checked indices] in core/backend.h) there is no flag and
// no synchronize: a bad index, which cannot occur there, would still be skipped.
template <typename ElementOf>
void launch_index_kernel(const index_plan::StridedOperands<3>& ops, int device, int64_t dim, int64_t size,
                         const char* op, Backend::IndexBounds bounds, const ElementOf& element_of) {
  const OnDevice on(device);
  std::optional<DeviceBadIndex> bad;
  if (bounds == Backend::IndexBounds::Check) bad.emplace(device, on.stream, op);
  index_plan::for_each_32bit_piece(ops, [&](const index_plan::StridedOperands<3>& piece) {
    const int64_t n = piece.numel();
    index_kernel<<<grid_stride_blocks(n, device, kGridStrideBlocksPerSm), kBlockThreads, 0, on.stream.handle()>>>(
        reinterpret_cast<const int64_t*>(piece.data[1]), index_plan::make_offset_calculator(piece, op), size, n,
        bad ? bad->flag() : nullptr, element_of(piece));
    KILN_CUDA_CHECK_LAUNCH();
  });
  if (!bad) return;
  // In a DeferIndexChecks scope the read-back waits for the scope's check() (Note
  // [Deferred index checks] in core/deferred_check.h); the flag lives on in the check.
  const bool deferred = defer_index_check([flag = *bad, device, op, dim, size] {
    const OnDevice on_flag_device(device);  // checked later, maybe with another device current
    flag.throw_if_seen(op, dim, size);
  });
  if (!deferred) bad->throw_if_seen(op, dim, size);
}

// out[p] = in[p with coordinate dim replaced by index[p]], p over out's shape, where the
// index is seen with `index_strides` over that shape.
void gather_along(const Tensor& in, int64_t dim, const Tensor& index, const std::vector<int64_t>& index_strides,
                  const Tensor& out, const char* op, Backend::IndexBounds bounds) {
  KILN_ASSERT(in.dim() >= 1 && in.dim() == out.dim() && index_strides.size() == out.sizes().size(), op,
              ": operands ", in.sizes(), ", ", out.sizes());
  if (out.numel() == 0) return;
  const int64_t in_step = in.strides()[dim];
  const index_plan::StridedOperands<3> ops =
      operands(out.sizes(), out, out.strides(), index, index_strides, in, row_zero_strides(in, dim));
  auto launch = [&]<typename Word>() {
    launch_index_kernel(ops, in.device().index, dim, in.sizes()[dim], op, bounds, [&](const auto& piece) {
      return GatherElement<Word>{reinterpret_cast<Word*>(piece.data[0]),
                                 reinterpret_cast<const Word*>(piece.data[2]), in_step};
    });
  };
  switch (in.element_size()) {
    case 1: launch.template operator()<uint8_t>(); break;
    case 2: launch.template operator()<uint16_t>(); break;
    case 4: launch.template operator()<uint32_t>(); break;
    case 8: launch.template operator()<uint64_t>(); break;
    default: KILN_ASSERT(false, op, ": element size ", in.element_size());
  }
}

}  // namespace

void CudaBackend::gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out,
                         IndexBounds bounds) {
  KILN_ASSERT(index.sizes() == out.sizes(), "gather: index ", index.sizes(), ", out ", out.sizes());
  gather_along(in, dim, index, index.strides(), out, "gather", bounds);
}

// A gather whose index is the 1-d index laid along dim, stride 0 over out's other dims.
void CudaBackend::index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  KILN_ASSERT(index.dim() == 1 && out.dim() == in.dim(), "index_select: index ", index.sizes(), ", out ",
              out.sizes());
  std::vector<int64_t> index_strides(out.dim(), 0);
  index_strides[dim] = index.strides()[0];
  gather_along(in, dim, index, index_strides, out, "index_select", IndexBounds::Check);
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                              IndexBounds bounds) {
  KILN_ASSERT(out.dim() >= 1 && out.dim() == index.dim() && src.dim() == index.dim(), "scatter_add: operands ",
              out.sizes(), ", ", index.sizes(), ", ", src.sizes());
  if (index.numel() == 0) return;
  const int64_t out_step = out.strides()[dim];
  const index_plan::StridedOperands<3> ops =
      operands(index.sizes(), out, row_zero_strides(out, dim), index, index.strides(), src, src.strides());
  visit_dtype<kNumericTypes>(out.dtype(), "scatter_add", [&]<typename T>() {
    launch_index_kernel(ops, out.device().index, dim, out.sizes()[dim], "scatter_add", bounds,
                        [&](const auto& piece) {
      return ScatterAddElement<T>{reinterpret_cast<T*>(piece.data[0]), reinterpret_cast<const T*>(piece.data[2]),
                                  out_step};
    });
  });
}

}  // namespace kiln::cuda
