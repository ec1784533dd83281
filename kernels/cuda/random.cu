// CudaBackend's random kernels: uniform, normal, randint, bernoulli and randperm.
//
// Math: Note [Philox streams] (core/generator.h), exactly as kernels/cpu/random.cpp
// (a state captured in a CUDA graph is resolved in the kernel, Note [Philox under capture]):
// element i of the output in memory order (any dense layout: contiguous, channels-last)
// uses the words (r0, r1) of Philox block offset + i / 2, lane i % 2, turned into a value
// by the shared helpers (philox_uniform_*, philox_normal, philox_u64) in the same types
// as the CPU (float for the uniform of float32/16/bf16, double for float64 and normal).
// So a seed gives the same tensor on both devices, bit for bit, except normal: its
// log/cos are CUDA's double-precision functions (max 1-2 ulp, not glibc's), so a float64
// normal may differ from the CPU's in the last bit or two; rounded to float32/16/bf16 it
// is equal unless the double lands within those ulps of a rounding boundary (about
// 2^-28 of float32 draws).
// Note [No contraction]: nvcc fuses `a + b * c` into one fma (one rounding) by default,
// while the CPU backend rounds twice (kernels/cpu/random.cpp is built with
// -ffp-contract=off, so also on hosts with FMA instructions); the kernels spell the CPU's
// arithmetic with __fmul_rn/__fadd_rn (and the double versions) so it is not fused.
//
// Launch: one thread per Philox block, i.e. per pair of elements (one philox4x32_10 call
// gives both elements' words), 256-thread blocks, a grid of at most 8 blocks per SM,
// grid-stride loops over 64-bit pair indices. Every output element is overwritten (=).
//
// randperm: keys[i] = philox_u64(r0, r1), values[i] = i, then CUB's radix sort of the
// pairs (cub::DeviceRadixSort::SortPairs, all 64 key bits). LSD radix sort is stable, so
// equal keys keep their index order, and the result equals the CPU's std::stable_sort.
// Keys, values and CUB's temporary storage are device tensors (the caching allocator).
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <limits>
#include <type_traits>

#include "core/dispatch.h"
#include "core/kernel_memory.h"
#include "core/memory_format.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/launch.h"

namespace kiln::cuda {
namespace {

// ---- draws: (r0, r1) -> one element, the CPU's arithmetic (Note [No contraction]) ------------

template <typename T>
struct UniformDraw {
  float low, span;  // float32/16/bf16: lo + u * span in float
  __device__ T operator()(uint32_t r0, uint32_t) const {
    return from_opmath<T>(__fadd_rn(low, __fmul_rn(philox_uniform_float(r0, kUniformDigits<T>), span)));
  }
};

template <>
struct UniformDraw<double> {
  double low, span;
  __device__ double operator()(uint32_t r0, uint32_t r1) const {
    return __dadd_rn(low, __dmul_rn(philox_uniform_double(r0, r1), span));
  }
};

template <typename T>
struct NormalDraw {
  double mean, std;
  __device__ T operator()(uint32_t r0, uint32_t r1) const {
    const double x = __dadd_rn(mean, __dmul_rn(std, philox_normal(r0, r1)));
    return from_opmath<T>(static_cast<opmath_t<T>>(x));
  }
};

template <typename T>
struct RandintDraw {
  uint64_t low, range;  // low + u64 mod range, wrapping as the CPU's
  __device__ T operator()(uint32_t r0, uint32_t r1) const {
    const int64_t v = static_cast<int64_t>(low + philox_u64(r0, r1) % range);
    return from_opmath<T>(static_cast<opmath_t<T>>(v));
  }
};

template <typename T>
struct BernoulliDraw {
  float p;
  __device__ T operator()(uint32_t r0, uint32_t) const {
    return from_opmath<T>(static_cast<opmath_t<T>>(philox_uniform_float(r0) < p ? 1 : 0));
  }
};

// The 64-bit sort key of randperm.
struct KeyDraw {
  __device__ uint64_t operator()(uint32_t r0, uint32_t r1) const { return philox_u64(r0, r1); }
};

// ---- kernels -------------------------------------------------------------------------------

// A grid-stride loop of 8 blocks per SM: every SM full, the loop strides the rest.
inline constexpr int64_t kGridStrideBlocksPerSm = 8;

// out[i] = draw(words of element i) for i < n; thread p computes Philox block offset + p
// once, for elements 2p (lanes 0, 1) and 2p + 1 (lanes 2, 3). A captured state reads its
// seed and offset from device memory here, as the kernel runs (Note [Philox under capture]).
template <typename T, typename Draw>
__global__ void philox_fill_kernel(T* out, int64_t n, PhiloxState unresolved, Draw draw) {
  const PhiloxState state = philox_resolve(unresolved);
  const int64_t pairs = (n + 1) / 2;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t block = state.offset + static_cast<uint64_t>(p);
    const Philox4x32 counter = {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}};
    const Philox4x32 words =
        philox4x32_10(counter, static_cast<uint32_t>(state.seed), static_cast<uint32_t>(state.seed >> 32));
    out[2 * p] = draw(words.v[0], words.v[1]);
    if (2 * p + 1 < n) out[2 * p + 1] = draw(words.v[2], words.v[3]);
  }
}

__global__ void iota_kernel(int64_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = i;
  }
}

// ---- launchers ------------------------------------------------------------------------------

// Fills `n` elements at `data` on `device` (current) and `stream`, one thread per pair.
template <typename T, typename Draw>
void philox_fill(T* data, int64_t n, int device, cudaStream_t stream, PhiloxState state, Draw draw) {
  if (n == 0) return;
  const unsigned blocks = grid_stride_blocks((n + 1) / 2, device, kGridStrideBlocksPerSm);
  philox_fill_kernel<<<blocks, kBlockThreads, 0, stream>>>(data, n, state, draw);
  KILN_CUDA_CHECK_LAUNCH();
}

// Runs fill<T>(data, n, device, stream) for out's dtype (in `kSet`) on out's device.
template <DTypeSet kSet, typename Fill>
void fill_random(const Tensor& out, const char* op, const Fill& fill) {
  KILN_ASSERT(is_non_overlapping_and_dense(out.sizes(), out.strides()), op,
              ": random kernels write dense outputs");
  const int device = out.device().index;
  const OnDevice on(device);
  visit_dtype<kSet>(out.dtype(), op, [&]<typename T>() {
    fill.template operator()<T>(static_cast<T*>(out.data_ptr()), out.numel(), device, on.stream.handle());
  });
}

}  // namespace

void CudaBackend::uniform(const Tensor& out, double low, double high, PhiloxState state) {
  fill_random<kFloatingTypes>(out, "rand", [&]<typename T>(T* data, int64_t n, int device, cudaStream_t stream) {
    if constexpr (std::is_same_v<T, double>) {
      philox_fill(data, n, device, stream, state, UniformDraw<double>{low, high - low});
    } else {
      philox_fill(data, n, device, stream, state,
                  UniformDraw<T>{static_cast<float>(low), static_cast<float>(high - low)});
    }
  });
}

void CudaBackend::normal(const Tensor& out, double mean, double std, PhiloxState state) {
  fill_random<kFloatingTypes>(out, "randn", [&]<typename T>(T* data, int64_t n, int device, cudaStream_t stream) {
    philox_fill(data, n, device, stream, state, NormalDraw<T>{mean, std});
  });
}

void CudaBackend::randint(const Tensor& out, int64_t low, int64_t high, PhiloxState state) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  fill_random<kNumericTypes>(out, "randint", [&]<typename T>(T* data, int64_t n, int device, cudaStream_t stream) {
    philox_fill(data, n, device, stream, state, RandintDraw<T>{static_cast<uint64_t>(low), range});
  });
}

void CudaBackend::bernoulli(const Tensor& out, double p, PhiloxState state) {
  fill_random<kAllTypes>(out, "bernoulli", [&]<typename T>(T* data, int64_t n, int device, cudaStream_t stream) {
    philox_fill(data, n, device, stream, state, BernoulliDraw<T>{static_cast<float>(p)});
  });
}

void CudaBackend::randperm(const Tensor& out, PhiloxState state) {
  KILN_ASSERT(out.dtype() == DType::Int64 && out.dim() == 1 && out.is_contiguous(), "randperm writes int64");
  const int64_t n = out.numel();
  if (n == 0) return;
  KILN_CHECK(n <= std::numeric_limits<int>::max(), "randperm: n = ", n,
             " is too large for the CUDA sort (CUB's radix sort takes at most 2^31 - 1 items); "
             "make the permutation on the CPU and copy it");
  const int device = out.device().index;
  const OnDevice on(device);
  const Tensor keys_in = allocate_tensor({n}, DType::Int64, out.device());
  const Tensor keys_out = allocate_tensor({n}, DType::Int64, out.device());
  const Tensor values_in = allocate_tensor({n}, DType::Int64, out.device());
  auto* keys = static_cast<uint64_t*>(keys_in.data_ptr());
  auto* sorted_keys = static_cast<uint64_t*>(keys_out.data_ptr());
  philox_fill(keys, n, device, on.stream.handle(), state, KeyDraw{});
  const unsigned blocks = grid_stride_blocks(n, device, kGridStrideBlocksPerSm);
  iota_kernel<<<blocks, kBlockThreads, 0, on.stream.handle()>>>(static_cast<int64_t*>(values_in.data_ptr()), n);
  KILN_CUDA_CHECK_LAUNCH();

  const auto* values = static_cast<const int64_t*>(values_in.data_ptr());
  auto* permutation = static_cast<int64_t*>(out.data_ptr());
  const int items = static_cast<int>(n);
  constexpr int kKeyBits = 64;
  size_t temp_bytes = 0;  // first call: how much temporary storage the sort needs
  KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, sorted_keys, values, permutation, items,
                                                  0, kKeyBits, on.stream.handle()));
  // At least one byte: a null temporary would make the second call a size query too, and
  // leave `out` unsorted and unwritten.
  const int64_t temp_size = std::max<int64_t>(static_cast<int64_t>(temp_bytes), 1);
  const Tensor temp = allocate_workspace(temp_size, out.device());
  KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, keys, sorted_keys, values,
                                                  permutation, items, 0, kKeyBits, on.stream.handle()));
}

}  // namespace kiln::cuda
