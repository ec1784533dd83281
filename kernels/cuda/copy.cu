// The device-side memory kernels of CudaBackend: casting copies on one device, fill and
// arange. (CudaBackend::copy, which moves data between host and devices and calls
// copy_on_device for casts and layouts, is in copy_transfer.cpp.)
//
//   copy_on_device  dst[i] = cast(src[i]) for all 8 x 8 dtype pairs, any strides, through
//                   the elementwise engine (elementwise.cuh) with an identity functor in
//                   the source's opmath type: Half/BFloat16 go through float, bool reads
//                   as 0/1, floating -> integer truncates as static_cast does; the
//                   conversion is the CPU backend's (functors::Cast, kernels/copy_cast.h:
//                   floating -> uint8 wraps through int64, -1.5 -> 255).
//   fill            dst[i] = value, any strides (the engine with no inputs).
//   arange          dst[i] = start + i * step, dst contiguous; floating dtypes compute it
//                   in double and round through opmath, integers in int64, as the CPU.
//   write_words     up to 16 64-bit words into a contiguous tensor, by one thread per
//                   word of one block; the words travel in the kernel's arguments, so the
//                   launch reads no host memory later (Note [Per-step values on the device]).
#include "core/dispatch.h"
#include "kernels/copy_cast.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_families.h"
#include "kernels/cuda/launch.h"
#include "kernels/wrapping_math.h"

namespace kiln::cuda {
namespace {

template <typename M>
struct Constant {
  M value;
  __device__ M operator()() const { return value; }
};

// ---- kernels --------------------------------------------------------------------------------

template <typename T>
__global__ void arange_floating(int64_t n, double start, double step, T* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_opmath<T>(static_cast<opmath_t<T>>(start + step * static_cast<double>(i)));
  }
}

template <typename T>
__global__ void arange_integral(int64_t n, int64_t start, int64_t step, T* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<T>(wrapping_add(start, wrapping_mul(step, i)));  // as the CPU's
  }
}

// The words of one write_words call, by value.
struct Words {
  uint64_t v[kMaxWrittenWords];
};

__global__ void write_words_kernel(uint64_t* dst, Words words, int count) {
  if (static_cast<int>(threadIdx.x) < count) dst[threadIdx.x] = words.v[threadIdx.x];
}

}  // namespace

// ---- launchers ------------------------------------------------------------------------------

void copy_on_device(const Tensor& src, const Tensor& dst) {
  KILN_ASSERT(src.device() == dst.device(), "copy_on_device across devices");
  const StridedLoop loop = make_strided_loop({&dst, &src});
  visit_dtype<kAllTypes>(dst.dtype(), "copy", [&]<typename D>() {
    visit_dtype<kAllTypes>(src.dtype(), "copy", [&]<typename S>() {
      run_elementwise<D, S>(loop, dst.device().index, functors::Cast<opmath_t<S>, D>{});
    });
  });
}

void CudaBackend::fill(const Tensor& dst, Scalar value) {
  const StridedLoop loop = make_strided_loop({&dst});
  visit_dtype<kAllTypes>(dst.dtype(), "fill", [&]<typename T>() {
    const opmath_t<T> v = static_cast<opmath_t<T>>(value.to<T>());
    run_elementwise<T>(loop, dst.device().index, Constant<opmath_t<T>>{v});
  });
}

void CudaBackend::write_words(const Tensor& dst, const uint64_t* words, int64_t count) {
  KILN_ASSERT(dst.is_contiguous() && dst.element_size() == 8 && dst.numel() == count && count <= kMaxWrittenWords,
              "write_words: bad target");
  if (count == 0) return;
  Words packed{};
  for (int64_t i = 0; i < count; ++i) packed.v[i] = words[i];
  const OnDevice on(dst.device().index);
  write_words_kernel<<<1, 32, 0, on.stream.handle()>>>(static_cast<uint64_t*>(dst.data_ptr()), packed,
                                                        static_cast<int>(count));
  KILN_CUDA_CHECK_LAUNCH();
}

void CudaBackend::arange(const Tensor& dst, Scalar start, Scalar step) {
  KILN_ASSERT(dst.is_contiguous(), "arange into a non-contiguous tensor");
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int device = dst.device().index;
  const OnDevice on(device);
  const unsigned blocks = grid_stride_blocks(n, device, /*blocks_per_sm=*/8);
  visit_dtype<kNumericTypes>(dst.dtype(), "arange", [&]<typename T>() {
    T* out = static_cast<T*>(dst.data_ptr());
    if constexpr (is_floating_v<T>) {
      arange_floating<T><<<blocks, kBlockThreads, 0, on.stream.handle()>>>(n, start.to_double(), step.to_double(), out);
    } else {
      arange_integral<T><<<blocks, kBlockThreads, 0, on.stream.handle()>>>(n, start.to_int(), step.to_int(), out);
    }
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda
