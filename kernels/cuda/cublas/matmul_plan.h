// How a strided row-major matrix is handed to column-major cuBLAS, without a copy when
// its layout allows (plain host code, tested on the host: tests/cuda/internal/).
//
// Note [Row-major products on column-major cuBLAS]: cuBLAS reads a matrix stored with
// leading dimension ld as column-major: element (i, j) at i + j * ld. A row-major matrix
// X [rows, cols] with strides (s_row, 1) is therefore, to cuBLAS, the column-major
// matrix X^T [cols, rows] with ld = s_row. So for C = A B in row-major we ask cuBLAS
// for C^T = B^T A^T: the operands are passed swapped (B first), and each is described by
// how cuBLAS gets its *transpose* from memory:
//   - rows contiguous (column stride 1): memory is X^T column-major, ld = row stride,
//     operation N;
//   - columns contiguous (row stride 1, a transposed view): memory is X column-major,
//     ld = column stride, operation T gives X^T.
// cuBLAS wants ld >= max(1, leading extent) and an int. A dimension of size 1 has no
// meaningful stride, so it is ignored and the smallest legal ld used. Any other layout
// (both strides > 1, stride 0 inside a matrix, overlapping rows) is copied to a
// contiguous temporary first. The batch stride may be anything, 0 included (broadcast).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>

namespace kiln::cuda {

// One row-major matrix of a batch: sizes and element strides.
struct MatrixLayout {
  int64_t rows, cols;
  int64_t row_stride, col_stride;
};

// How cuBLAS reads X^T from X's memory (Note [Row-major products on column-major cuBLAS]).
struct TransposedView {
  bool transpose;  // CUBLAS_OP_T when true, CUBLAS_OP_N when false
  int64_t ld;      // leading dimension, in elements
};

constexpr bool fits_cublas_int(int64_t value) { return value >= 0 && value <= INT_MAX; }

// X^T as cuBLAS can read it in place, or nullopt when X must be copied first.
inline std::optional<TransposedView> transposed_view(const MatrixLayout& x) {
  if (x.col_stride == 1 || x.cols == 1) {
    const int64_t min_ld = std::max<int64_t>(1, x.cols);
    const int64_t ld = x.rows == 1 ? min_ld : x.row_stride;
    if (ld >= min_ld && fits_cublas_int(ld)) return TransposedView{false, ld};
  }
  if (x.row_stride == 1 || x.rows == 1) {
    const int64_t min_ld = std::max<int64_t>(1, x.rows);
    const int64_t ld = x.cols == 1 ? min_ld : x.col_stride;
    if (ld >= min_ld && fits_cublas_int(ld)) return TransposedView{true, ld};
  }
  return std::nullopt;
}

// An output C [rows, cols] is written as C^T with operation N only (cuBLAS cannot
// transpose its output): rows contiguous. Otherwise the product goes to a temporary.
inline std::optional<int64_t> output_ld(const MatrixLayout& c) {
  const std::optional<TransposedView> view = transposed_view(c);
  if (!view || view->transpose) return std::nullopt;
  return view->ld;
}

// The batch stride cuBLAS sees: a batch of one has no stride to speak of.
constexpr int64_t cublas_batch_stride(int64_t batch, int64_t stride) { return batch == 1 ? 0 : stride; }

}  // namespace kiln::cuda
