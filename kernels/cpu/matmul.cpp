// CpuBackend::bmm: batched GEMM through Eigen (with conv.cpp, the only files that include it).
//
// Each batch's operands are Eigen::Maps over the strided memory (row-major maps with
// dynamic outer and inner strides), so transposed or sliced operands need no copy: Eigen
// packs the blocks of any stride itself. The product is written straight into `out`
// (noalias: out never overlaps the inputs). Float16/BFloat16 are converted to float32
// matrices, multiplied, and rounded on store (Note [Opmath]). Parallelism: many small
// batches run in parallel over the batch with one thread per product; otherwise batches
// run in turn and Eigen's own OpenMP threading splits each product.
#include <Eigen/Core>
#include <omp.h>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"

namespace kiln::cpu {
namespace {

template <typename T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strides = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
template <typename T>
using ConstMap = Eigen::Map<const Matrix<T>, Eigen::Unaligned, Strides>;
template <typename T>
using MutableMap = Eigen::Map<Matrix<T>, Eigen::Unaligned, Strides>;

// Batch `i` of a 3-d tensor as a rows x cols strided map.
template <typename T>
ConstMap<T> batch_view(const Tensor& t, int64_t i) {
  const T* base = static_cast<const T*>(t.data_ptr()) + i * t.stride(0);
  return ConstMap<T>(base, t.size(1), t.size(2), Strides(t.stride(1), t.stride(2)));
}

template <typename T>
void multiply_batch(const Tensor& a, const Tensor& b, const Tensor& out, int64_t i) {
  T* out_base = static_cast<T*>(out.data_ptr()) + i * out.stride(0);
  MutableMap<T> c(out_base, out.size(1), out.size(2), Strides(out.stride(1), out.stride(2)));
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const Matrix<float> af = batch_view<T>(a, i).unaryExpr([](T v) { return static_cast<float>(v); });
    const Matrix<float> bf = batch_view<T>(b, i).unaryExpr([](T v) { return static_cast<float>(v); });
    const Matrix<float> cf = af * bf;
    c = cf.unaryExpr([](float v) { return T(v); });
  } else {
    c.noalias() = batch_view<T>(a, i) * batch_view<T>(b, i);
  }
}

}  // namespace

void CpuBackend::bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t batch = a.size(0);
  const double flops_per_batch = 2.0 * static_cast<double>(a.size(1)) * static_cast<double>(a.size(2)) *
                                 static_cast<double>(b.size(2));
  // Small products gain nothing from Eigen's threading; spread the batch instead.
  const bool parallel_over_batch = batch > 1 && flops_per_batch < 4.0e6 && omp_get_max_threads() > 1;
  visit_dtype<kNumericTypes>(a.dtype(), "bmm", [&]<typename T>() {
    if (parallel_over_batch) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < batch; ++i) multiply_batch<T>(a, b, out, i);
    } else {
      for (int64_t i = 0; i < batch; ++i) multiply_batch<T>(a, b, out, i);
    }
  });
}

}  // namespace kiln::cpu
