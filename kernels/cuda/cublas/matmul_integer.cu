// Integer bmm: a shared-memory tiled GEMM (cuBLAS has no wrap-around integer products).
//
// Math: out[z, i, j] = sum_k a[z, i, k] * b[z, k, j], accumulated in the dtype's own
// wrap-around (two's complement) arithmetic, exactly as the CPU backend's Eigen product
// computes in T. Integer addition and multiplication modulo 2^bits form a ring, so the
// result is the same whatever the summation order: the GPU matches the CPU bit for bit.
// To keep overflow well-defined in C++ the sum runs in the unsigned type of the same (or,
// for uint8, a wider) width and is converted back to T once at the end (modular in C++20).
// The kernel overwrites `out` (=), it never accumulates into it.
//
// Layout: any strides for all three operands (transposed, sliced, expanded with stride 0),
// passed as element strides; indices are 64-bit.
//
// Launch shape: 16 x 16 threads compute one 16 x 16 tile of out. For each 16-wide slice
// of K, the block stages a 16 x 16 tile of a and of b in shared memory (one element per
// thread), synchronises, and every thread does 16 multiply-adds from shared memory: each
// global element is loaded once per tile instead of once per output element, a 16x cut in
// global traffic over the naive kernel. Tiles past the edges load zeros. gridDim.x covers
// N's tiles; M's tiles and the batch are covered by gridDim.y and gridDim.z with
// grid-stride loops, since those grid dimensions stop at 65535. Integer products are rare
// (indices, counting) and small, so this simple kernel is the whole story; floating-point
// products, where register tiles and tensor cores pay, go to cuBLAS (matmul.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/cuda/cublas/matmul_integer.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"

namespace kiln::cuda {
namespace {

constexpr int kTile = 16;
constexpr int64_t kMaxGridYZ = 65535;

// The unsigned type the sum of T products wraps in.
template <typename T>
using WrapAccumulator = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

struct MatrixStrides {
  int64_t batch, row, col;
};

struct IntegerGemmShape {
  int64_t batch, m, n, k;
  MatrixStrides a, b, out;
};

// ---- kernels --------------------------------------------------------------------------------

template <typename T>
__global__ void bmm_integer_tiled(const T* a, const T* b, T* out, IntegerGemmShape shape) {
  using Acc = WrapAccumulator<T>;
  __shared__ T a_tile[kTile][kTile];
  __shared__ T b_tile[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  const int64_t row_tiles = (shape.m + kTile - 1) / kTile;

  for (int64_t z = blockIdx.z; z < shape.batch; z += gridDim.z) {
    const T* a_batch = a + z * shape.a.batch;
    const T* b_batch = b + z * shape.b.batch;
    for (int64_t row_tile = blockIdx.y; row_tile < row_tiles; row_tile += gridDim.y) {
      const int64_t row = row_tile * kTile + ty;
      Acc sum = 0;
      for (int64_t k0 = 0; k0 < shape.k; k0 += kTile) {
        const int64_t a_col = k0 + tx, b_row = k0 + ty;
        a_tile[ty][tx] = (row < shape.m && a_col < shape.k) ? a_batch[row * shape.a.row + a_col * shape.a.col] : T(0);
        b_tile[ty][tx] = (b_row < shape.k && col < shape.n) ? b_batch[b_row * shape.b.row + col * shape.b.col] : T(0);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTile; ++kk) sum += static_cast<Acc>(a_tile[ty][kk]) * static_cast<Acc>(b_tile[kk][tx]);
        __syncthreads();  // the next slice overwrites the tiles
      }
      if (row < shape.m && col < shape.n) {
        out[z * shape.out.batch + row * shape.out.row + col * shape.out.col] = static_cast<T>(sum);
      }
    }
  }
}

// ---- launchers ------------------------------------------------------------------------------

MatrixStrides strides_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

template <typename T>
void launch_bmm_integer(const Tensor& a, const Tensor& b, const Tensor& out, cudaStream_t stream) {
  const IntegerGemmShape shape{a.size(0), a.size(1), b.size(2), a.size(2), strides_of(a), strides_of(b), strides_of(out)};
  const int64_t col_tiles = (shape.n + kTile - 1) / kTile;
  const int64_t row_tiles = (shape.m + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(std::min(row_tiles, kMaxGridYZ)),
                  static_cast<unsigned>(std::min(shape.batch, kMaxGridYZ)));
  const dim3 block(kTile, kTile);
  bmm_integer_tiled<T><<<grid, block, 0, stream>>>(
      static_cast<const T*>(a.data_ptr()), static_cast<const T*>(b.data_ptr()), static_cast<T*>(out.data_ptr()),
      shape);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void bmm_integer(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (out.numel() == 0) return;
  KILN_CHECK((out.size(2) + kTile - 1) / kTile <= INT32_MAX, "bmm: N = ", out.size(2),
             " is too large for the integer GEMM kernel's grid");
  const OnDevice on(out.device().index);
  visit_dtype<kIntegralTypes>(out.dtype(), "bmm", [&]<typename T>() { launch_bmm_integer<T>(a, b, out, on.stream.handle()); });
}

}  // namespace kiln::cuda
