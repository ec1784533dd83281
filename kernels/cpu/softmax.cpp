// CpuBackend softmax and log-softmax along one dim, forward and backward, fused.
//
// Math, for one row x of length n along `dim`:
//   m = max_j x_j                        (subtracted so that no exp overflows)
//   s = sum_j exp(x_j - m)
//   softmax:      y_j = exp(x_j - m) / s
//   log_softmax:  y_j = (x_j - m) - log s
// Backward, from the saved output y and the incoming gradient g (overwrites grad_in):
//   softmax:      grad_in_j = y_j (g_j - sum_k g_k y_k)
//   log_softmax:  grad_in_j = g_j - exp(y_j) sum_k g_k
// A row whose max is -inf (all -inf) or +inf, or that holds a NaN, gives NaN, as PyTorch.
//
// Layout: any strides. Every dim except `dim` indexes a row; a row's elements are
// stride(dim) apart, so dim != last needs no transpose. When the innermost other dim has
// stride 1 in every operand (softmax over the channels of a contiguous NCDHW tensor),
// neighbouring rows lie side by side in memory: a kernel call then takes a block of up to
// kBlock such rows and walks them together, one contiguous slice per step along dim,
// instead of striding through one row at a time (about 10x faster there). A call makes
// three passes (max, sum, write) and writes an element only after its last read, so `out`
// may alias `in`. Blocks are split over threads, about kGrain elements a chunk.
// Float16/BFloat16 compute in float32 (Note [Opmath]); the sums accumulate in double
// (Note [Reduction accumulators] in reduce.cpp).
//
// Note [Vectorised softmax]: float32 (and the half types, computed in float32) take exp
// from vectorisable_exp.h instead of libm (through functors::exp_of), so the loops over neighbouring rows vectorise;
// a contiguous row (softmax over the last dim of a contiguous tensor, the classifier's
// case) has its own kernels, softmax_row and softmax_bwd_row, whose passes run over the
// row in kLanes independent lanes (max, double sum) and vectorise too; a NaN reaches the sum through its
// exp and makes the row NaN. Float64 keeps std::exp.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain
#include "kernels/elementwise_functors.h"  // exp_of
#include "kernels/vectorisable_exp.h"

namespace kiln::cpu {
namespace {

// Rows walked side by side at most (their accumulators live on the stack).
inline constexpr int64_t kBlock = 64;

// The rows of up to three same-shaped operands along `dim`, grouped in blocks of
// neighbouring rows: element offsets of a block's first row, and the step along dim.
class RowBlocks {
 public:
  RowBlocks(std::initializer_list<const Tensor*> operands, int64_t dim) {
    const Tensor& first = **operands.begin();
    length_ = first.sizes()[dim];
    for (int64_t d = 0; d < first.dim(); ++d) {
      if (d != dim && first.sizes()[d] != 1) sizes_.push_back(first.sizes()[d]);
    }
    strides_.resize(sizes_.size());
    bool inner_contiguous = !sizes_.empty();
    int k = 0;
    for (const Tensor* t : operands) {
      step_[k] = t->strides()[dim];
      size_t i = 0;
      for (int64_t d = 0; d < first.dim(); ++d) {
        if (d != dim && first.sizes()[d] != 1) strides_[i++][k] = t->strides()[d];
      }
      inner_contiguous = inner_contiguous && strides_.back()[k] == 1;
      ++k;
    }
    rows_ = 1;
    for (int64_t s : sizes_) rows_ *= s;
    run_ = sizes_.empty() ? 1 : sizes_.back();
    max_width_ = inner_contiguous ? kBlock : 1;
    blocks_per_run_ = (run_ + max_width_ - 1) / max_width_;
  }

  int64_t length() const { return length_; }
  int64_t step(int k) const { return step_[k]; }

  // Calls fn(offsets, width) for each block of `width` side-by-side rows, blocks split
  // over threads; offsets are those of the block's first row in each operand.
  template <typename Fn>
  void for_each_block(const Fn& fn) const {
    if (rows_ == 0) return;  // an empty other dim (run_ would be 0 below)
    const int64_t blocks = rows_ / run_ * blocks_per_run_;
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, length_ * max_width_));
    parallel_for(blocks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t start = b % blocks_per_run_ * max_width_;  // within its run
        const int64_t row = b / blocks_per_run_ * run_ + start;
        fn(offsets(row), std::min(max_width_, run_ - start));
      }
    });
  }

 private:
  // Offsets of row `row` (row-major over the other dims) in each operand.
  std::array<int64_t, 3> offsets(int64_t row) const {
    std::array<int64_t, 3> offsets{};
    for (size_t i = sizes_.size(); i-- > 0;) {
      const int64_t index = row % sizes_[i];
      row /= sizes_[i];
      for (int k = 0; k < 3; ++k) offsets[k] += index * strides_[i][k];
    }
    return offsets;
  }

  int64_t length_ = 1;
  int64_t rows_ = 1;
  int64_t run_ = 1;        // rows along the innermost other dim
  int64_t max_width_ = 1;  // kBlock when those rows lie side by side, else 1
  int64_t blocks_per_run_ = 1;
  std::array<int64_t, 3> step_{};
  std::vector<int64_t> sizes_;  // the other dims, outermost first
  std::vector<std::array<int64_t, 3>> strides_;
};

// ---- kernels: `width` side-by-side rows; row c's element j is at [j * step + c] ------------

// Lanes of the contiguous-row kernel: 16 floats, a 512-bit register (two 256-bit ones).
inline constexpr int64_t kLanes = 16;

// One contiguous float32 row of length n: max, sum of exp(x - max) in double,
// then the output, each pass in kLanes lanes plus a scalar tail. Same results as
// softmax_fwd's general loops but for the order of the double sum.
void softmax_row(const float* x, float* y, int64_t n, bool log) {
  // The max in kLanes lanes of a GCC/Clang vector type: a compare-and-select on floats is
  // no reduction the auto-vectoriser takes (NaN and -0 semantics), written on the vector
  // type it is one instruction per kLanes elements. A NaN is skipped here, but it reaches
  // the sum through its exp, and a NaN sum makes the whole row NaN, as PyTorch's.
  using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
  Lanes lane_max;
  for (int64_t l = 0; l < kLanes; ++l) lane_max[l] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes v;
    std::memcpy(&v, x + j, sizeof(v));
    lane_max = v > lane_max ? v : lane_max;
  }
  float max = -std::numeric_limits<float>::infinity();
  for (; j < n; ++j) max = x[j] > max ? x[j] : max;
  for (int64_t l = 0; l < kLanes; ++l) max = lane_max[l] > max ? lane_max[l] : max;

  std::array<double, kLanes> lane_sum{};
  j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {  // vectorised: tests/kernels/check_vectorized.cmake
      const float e = vectorisable_exp(x[j + l] - max);
      lane_sum[l] += e;
      if (!log) y[j + l] = e;
    }
  }
  double sum = 0;
  for (; j < n; ++j) {
    const float e = vectorisable_exp(x[j] - max);
    sum += e;
    if (!log) y[j] = e;
  }
  for (int64_t l = 0; l < kLanes; ++l) sum += lane_sum[l];

  if (log) {  // (x - m) - log s, not x - (m + log s): that rounds at the scale of m
    const float log_sum = static_cast<float>(std::log(sum));
    for (j = 0; j < n; ++j) {  // vectorised: tests/kernels/check_vectorized.cmake
      y[j] = (x[j] - max) - log_sum;
    }
  } else {
    const float scale = static_cast<float>(1.0 / sum);
    for (j = 0; j < n; ++j) y[j] *= scale;  // vectorised: tests/kernels/check_vectorized.cmake
  }
}

template <typename T>
void softmax_fwd(const T* x, int64_t x_step, T* y, int64_t y_step, int64_t n, int64_t width, bool log) {
  using V = opmath_t<T>;
  std::array<V, kBlock> max;
  std::array<double, kBlock> sum;
  std::fill_n(max.begin(), width, -std::numeric_limits<V>::infinity());
  std::fill_n(sum.begin(), width, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < width; ++c) {
      const V v = static_cast<V>(x[j * x_step + c]);
      if (std::isnan(v) || v > max[c]) max[c] = v;
    }
  }
  // float and double outputs hold exp(x - m) as computed, so softmax stores it in this pass
  // and only rescales in the next (one exp per element); half types would round it twice,
  // so they compute exp again.
  const bool store_exp = std::is_same_v<T, V> && !log;
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < width; ++c) {  // vectorised: tests/kernels/check_vectorized.cmake
      const V e = functors::exp_of(static_cast<V>(x[j * x_step + c]) - max[c]);
      sum[c] += e;
      if (store_exp) y[j * y_step + c] = static_cast<T>(e);
    }
  }
  std::array<V, kBlock> scale;  // 1 / s, or log s
  for (int64_t c = 0; c < width; ++c) scale[c] = static_cast<V>(log ? std::log(sum[c]) : 1.0 / sum[c]);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < width; ++c) {
      V out;
      if (log) {  // (x - m) - log s, not x - (m + log s): that rounds at the scale of m
        out = (static_cast<V>(x[j * x_step + c]) - max[c]) - scale[c];
      } else if (store_exp) {
        out = static_cast<V>(y[j * y_step + c]) * scale[c];
      } else {
        out = functors::exp_of(static_cast<V>(x[j * x_step + c]) - max[c]) * scale[c];
      }
      y[j * y_step + c] = static_cast<T>(out);
    }
  }
}

// Backward of one contiguous float32 row of length n (grad_out g, output y, grad_in gi):
// the row's sum (sum g y for softmax, sum g for log_softmax) in kLanes double lanes, then
// grad_in in one pass, both vectorised. Same results as softmax_bwd's general loops but
// for the order of the double sum. Cross-entropy's backward is this over the logits.
void softmax_bwd_row(const float* g, const float* y, float* gi, int64_t n, bool log) {
  std::array<double, kLanes> lane_sum{};
  double sum = 0;
  int64_t j = 0;
  if (log) {
    for (; j + kLanes <= n; j += kLanes) {  // vectorised: tests/kernels/check_vectorized.cmake
      for (int64_t l = 0; l < kLanes; ++l) lane_sum[l] += g[j + l];
    }
    for (; j < n; ++j) sum += g[j];
  } else {
    for (; j + kLanes <= n; j += kLanes) {  // vectorised: tests/kernels/check_vectorized.cmake
      for (int64_t l = 0; l < kLanes; ++l) lane_sum[l] += static_cast<double>(g[j + l]) * y[j + l];
    }
    for (; j < n; ++j) sum += static_cast<double>(g[j]) * y[j];
  }
  for (int64_t l = 0; l < kLanes; ++l) sum += lane_sum[l];
  const float t = static_cast<float>(sum);
  if (log) {
    for (j = 0; j < n; ++j) gi[j] = g[j] - vectorisable_exp(y[j]) * t;  // vectorised: tests/kernels/check_vectorized.cmake
  } else {
    for (j = 0; j < n; ++j) gi[j] = y[j] * (g[j] - t);  // vectorised: tests/kernels/check_vectorized.cmake
  }
}

template <typename T>
void softmax_bwd(const T* g, int64_t g_step, const T* y, int64_t y_step, T* gi, int64_t gi_step, int64_t n,
                 int64_t width, bool log) {
  using V = opmath_t<T>;
  std::array<double, kBlock> total;  // softmax: sum g y; log_softmax: sum g
  std::fill_n(total.begin(), width, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < width; ++c) {
      const double gj = static_cast<V>(g[j * g_step + c]);
      total[c] += log ? gj : gj * static_cast<V>(y[j * y_step + c]);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < width; ++c) {
      const V gj = static_cast<V>(g[j * g_step + c]);
      const V yj = static_cast<V>(y[j * y_step + c]);
      const V t = static_cast<V>(total[c]);
      gi[j * gi_step + c] = static_cast<T>(log ? gj - functors::exp_of(yj) * t : yj * (gj - t));
    }
  }
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------

void CpuBackend::softmax(const Tensor& in, int64_t dim, bool log, const Tensor& out) {
  KILN_ASSERT(in.sizes() == out.sizes() && in.dtype() == out.dtype(), "softmax: output ", out.sizes(), " ",
              out.dtype(), " for input ", in.sizes(), " ", in.dtype());
  const RowBlocks rows({&in, &out}, dim);
  visit_dtype<kFloatingTypes>(in.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>() {
    const T* x = static_cast<const T*>(in.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    rows.for_each_block([&](const std::array<int64_t, 3>& o, int64_t width) {
      if constexpr (std::is_same_v<T, float>) {
        if (width == 1 && rows.step(0) == 1 && rows.step(1) == 1) {
          return softmax_row(x + o[0], y + o[1], rows.length(), log);
        }
      }
      softmax_fwd(x + o[0], rows.step(0), y + o[1], rows.step(1), rows.length(), width, log);
    });
  });
}

void CpuBackend::softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log,
                                  const Tensor& grad_in) {
  KILN_ASSERT(grad_out.sizes() == out.sizes() && grad_in.sizes() == out.sizes() &&
                  grad_out.dtype() == out.dtype() && grad_in.dtype() == out.dtype(),
              "softmax_backward: shapes/dtypes differ");
  const RowBlocks rows({&grad_out, &out, &grad_in}, dim);
  visit_dtype<kFloatingTypes>(out.dtype(), log ? "log_softmax_backward" : "softmax_backward",
                              [&]<typename T>() {
                                const T* g = static_cast<const T*>(grad_out.data_ptr());
                                const T* y = static_cast<const T*>(out.data_ptr());
                                T* gi = static_cast<T*>(grad_in.data_ptr());
                                rows.for_each_block([&](const std::array<int64_t, 3>& o, int64_t width) {
                                  if constexpr (std::is_same_v<T, float>) {
                                    if (width == 1 && rows.step(0) == 1 && rows.step(1) == 1 && rows.step(2) == 1) {
                                      return softmax_bwd_row(g + o[0], y + o[1], gi + o[2], rows.length(), log);
                                    }
                                  }
                                  softmax_bwd(g + o[0], rows.step(0), y + o[1], rows.step(1), gi + o[2],
                                              rows.step(2), rows.length(), width, log);
                                });
                              });
}

}  // namespace kiln::cpu
