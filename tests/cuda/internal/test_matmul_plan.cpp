// The GEMM operand planning of kernels/cuda/cublas/matmul_plan.h, on the host: which
// row-major layouts cuBLAS reads in place (and with which operation and leading
// dimension), which must be copied, and which outputs cuBLAS can write.
#include <gtest/gtest.h>

#include "kernels/cuda/cublas/matmul_plan.h"
#include "kernels/cuda/cublas/cublas_handle.h"

namespace kiln::cuda {
namespace {

// A contiguous row-major [rows, cols] matrix and its transposed view.
MatrixLayout contiguous(int64_t rows, int64_t cols) { return {rows, cols, cols, 1}; }
MatrixLayout transposed(int64_t rows, int64_t cols) { return {rows, cols, 1, rows}; }

void expect_view(const std::optional<TransposedView>& view, bool transpose, int64_t ld) {
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->transpose, transpose);
  EXPECT_EQ(view->ld, ld);
}

TEST(MatmulPlan, ContiguousRowsAreReadAsTheTransposeWithOperationN) {
  expect_view(transposed_view(contiguous(5, 7)), false, 7);
  // A row slice of a wider matrix: ld is the row stride.
  expect_view(transposed_view({5, 7, 20, 1}), false, 20);
}

TEST(MatmulPlan, TransposedViewsAreReadWithOperationT) {
  // b.transpose(1, 2) of a contiguous [7, 5] matrix: strides (1, 5).
  expect_view(transposed_view(transposed(5, 7)), true, 5);
  expect_view(transposed_view({5, 7, 1, 9}), true, 9);
}

TEST(MatmulPlan, SizeOneDimensionsGetTheSmallestLegalLd) {
  // A single row: its row stride is meaningless (may be 0 or huge); ld = cols.
  expect_view(transposed_view({1, 7, 0, 1}), false, 7);
  expect_view(transposed_view({1, 7, 123456, 1}), false, 7);
  // A single column: the column stride is meaningless; the rows' stride is the ld.
  expect_view(transposed_view({5, 1, 3, 0}), false, 3);
  // A single row read through its column stride 1 of a transposed view.
  expect_view(transposed_view({1, 7, 1, 1}), false, 7);
  // A single row with a column stride > 1: as a column-major [1, 7] matrix, ld = stride.
  expect_view(transposed_view({1, 7, 1, 4}), true, 4);
  expect_view(transposed_view({1, 1, 0, 0}), false, 1);
}

TEST(MatmulPlan, LayoutsCublasCannotReadAreCopied) {
  EXPECT_FALSE(transposed_view({5, 7, 14, 2}).has_value());   // every other column
  EXPECT_FALSE(transposed_view({5, 7, 0, 1}).has_value());    // broadcast rows (stride 0)
  EXPECT_FALSE(transposed_view({5, 7, 1, 0}).has_value());    // broadcast columns
  EXPECT_FALSE(transposed_view({5, 7, 3, 1}).has_value());    // overlapping rows: ld < cols
  EXPECT_FALSE(transposed_view({5, 7, int64_t{INT_MAX} + 1, 1}).has_value());  // ld beyond int
}

TEST(MatmulPlan, OutputsMustHaveContiguousRows) {
  EXPECT_EQ(output_ld(contiguous(5, 7)), 7);
  EXPECT_EQ(output_ld({5, 7, 16, 1}), 16);
  EXPECT_EQ(output_ld({5, 1, 2, 2}), 2);
  EXPECT_EQ(output_ld({1, 7, 0, 1}), 7);
  EXPECT_FALSE(output_ld(transposed(5, 7)).has_value());  // cuBLAS cannot transpose C
  EXPECT_FALSE(output_ld({5, 7, 14, 2}).has_value());     // poisoned_strided's every other element
  EXPECT_FALSE(output_ld({1, 7, 14, 2}).has_value());
}

TEST(MatmulPlan, BatchStrideAndIntLimits) {
  EXPECT_EQ(cublas_batch_stride(1, 12345), 0);
  EXPECT_EQ(cublas_batch_stride(4, 0), 0);
  EXPECT_EQ(cublas_batch_stride(4, 35), 35);
  EXPECT_TRUE(fits_cublas_int(INT_MAX));
  EXPECT_FALSE(fits_cublas_int(int64_t{INT_MAX} + 1));
  EXPECT_FALSE(fits_cublas_int(-1));
}

TEST(MatmulPlan, WorkspaceFollowsCublasGuidance) {
  EXPECT_EQ(cublas_workspace_bytes(9), size_t{32} << 20);  // Hopper
  EXPECT_EQ(cublas_workspace_bytes(8), size_t{4} << 20);   // Ampere and before
}

}  // namespace
}  // namespace kiln::cuda
