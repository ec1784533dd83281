// CpuBackend's index kernels: gather, index_select and scatter_add.
//
// Math (shown for dim 0 of a 3-d tensor; the other dims alike):
//   gather:       out[i][j][k]  = in[index[i][j][k]][j][k]     out overwritten (=)
//   index_select: out[i][j][k]  = in[index[i]][j][k]           out overwritten (=)
//   scatter_add:  out[index[i][j][k]][j][k] += src[i][j][k]    out accumulated (+=)
// Layout: any strides on every operand. The op layer (core/ops/index.cpp) hands over
// operands of one rank >= 1 (a 0-d tensor as [1]), an index no larger than the other
// operands outside dim, and for scatter_add an `out` without self-overlap (a fresh clone).
//
// How: the elementwise engine's strided loop (elementwise_engine.h) walks one shape over
// several operands. The indexed operand (gather's `in`, scatter_add's `out`) is seen
// through an alias with the index's sizes and stride 0 along dim, so the engine hands the
// kernel the address of each position's "row 0" and the kernel adds index * stride(dim).
//
// Parallelism: gather and index_select write every out element once, so their elements
// are split over threads freely (parallel_for). In scatter_add two positions that differ
// only along dim may add into the same element, while positions that differ in any other
// dim never do. So scatter_add splits the columns (the positions with dim fixed at 0)
// over threads, and each thread walks dim in order for its columns: race-free, and every
// sum is accumulated in the same order (k = 0, 1, ...) whatever the thread count, so the
// result is deterministic and equal, bit for bit, to a serial loop.
//
// Bounds: every index is checked against [0, size) as it is read. A bad one is skipped
// (never dereferenced), recorded, and thrown after the loop: an exception must not leave
// an OpenMP region. With several bad indices, any one of them may be the one reported.
// The check is a compare per element on the CPU, so it runs even for IndexBounds::Checked
// (Note [Checked indices] in core/backend.h).
// Float16/BFloat16 sums go through float and round on each store (Note [Opmath]).
#include <algorithm>
#include <atomic>

#include "core/dispatch.h"
#include "core/pooled.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"

namespace kiln::cpu {
namespace {

// `t`'s data seen with other sizes and strides (an internal alias: no autograd state).
Tensor alias(const Tensor& t, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  return Tensor(make_pooled<TensorImpl>(t.storage(), t.storage_offset(), sizes, strides, t.dtype(), t.device()));
}

// `t` over `sizes`, with stride 0 along dim: every position points at its row 0.
Tensor row_zero_alias(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  std::vector<int64_t> strides = t.strides();
  strides[dim] = 0;
  return alias(t, sizes, strides);
}

int64_t byte_stride(const Tensor& t, int64_t dim) { return t.strides()[dim] * static_cast<int64_t>(t.element_size()); }

// The first out-of-range index recorded by any thread.
class BadIndex {
 public:
  void record(int64_t value) {
    bool expected = false;
    if (seen_.compare_exchange_strong(expected, true)) value_ = value;
  }
  // Called after the parallel region (whose end is a barrier), so value_ is visible.
  void throw_if_seen(const char* op, int64_t dim, int64_t size) const {
    KILN_CHECK(!seen_.load(), op, ": index ", value_, " is out of bounds for dimension ", dim, " with size ", size);
  }

 private:
  std::atomic<bool> seen_{false};
  int64_t value_ = 0;
};

// out[p] = in[p with its dim coordinate replaced by index[p]], for p over index's shape.
void gather_along(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out, const char* op) {
  KILN_ASSERT(in.dim() >= 1 && in.dim() == index.dim() && index.sizes() == out.sizes(), op, ": operands ",
              in.sizes(), ", ", index.sizes(), ", ", out.sizes());
  const int64_t size = in.sizes()[dim];
  const int64_t step = byte_stride(in, dim);
  const Tensor in_rows = row_zero_alias(in, index.sizes(), dim);
  const StridedLoop loop = make_strided_loop({&out, &index, &in_rows});
  BadIndex bad;
  visit_dtype<kAllTypes>(in.dtype(), op, [&]<typename T>() {
    parallel_for(loop.numel, kGrain, [&](int64_t begin, int64_t end) {
      for_each_run(loop, begin, end, [&](char** p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t j = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
          if (j < 0 || j >= size) {
            bad.record(j);
            continue;
          }
          *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[2] + i * s[2] + j * step);
        }
      });
    });
  });
  bad.throw_if_seen(op, dim, size);
}

}  // namespace

void CpuBackend::gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out, IndexBounds) {
  gather_along(in, dim, index, out, "gather");
}

// A gather whose index is the 1-d index laid along dim and broadcast (stride 0) over the
// other dims of out.
void CpuBackend::index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  KILN_ASSERT(index.dim() == 1 && out.dim() == in.dim(), "index_select: index ", index.sizes(), ", out ",
              out.sizes());
  std::vector<int64_t> strides(out.dim(), 0);
  strides[dim] = index.strides()[0];
  gather_along(in, dim, alias(index, out.sizes(), strides), out, "index_select");
}

void CpuBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, IndexBounds) {
  KILN_ASSERT(out.dim() >= 1 && out.dim() == index.dim() && src.dim() == index.dim(), "scatter_add: operands ",
              out.sizes(), ", ", index.sizes(), ", ", src.sizes());
  const int64_t size = out.sizes()[dim];
  const int64_t steps = index.sizes()[dim];  // positions along dim in each column
  const int64_t out_step = byte_stride(out, dim), index_step = byte_stride(index, dim);
  const int64_t src_step = byte_stride(src, dim);
  // The columns: every operand over index's sizes with dim cut to 1 (out at its row 0).
  std::vector<int64_t> column_sizes = index.sizes();
  column_sizes[dim] = 1;
  const Tensor out_columns = alias(out, column_sizes, out.strides());
  const Tensor index_columns = alias(index, column_sizes, index.strides());
  const Tensor src_columns = alias(src, column_sizes, src.strides());
  const StridedLoop columns = make_strided_loop({&out_columns, &index_columns, &src_columns});
  BadIndex bad;
  visit_dtype<kNumericTypes>(out.dtype(), "scatter_add", [&]<typename T>() {
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(steps, 1));
    parallel_for(columns.numel, grain, [&](int64_t begin, int64_t end) {
      for (int64_t k = 0; k < steps; ++k) {  // in order along dim: see the header
        StridedLoop at_k = columns;
        at_k.data[1] += k * index_step;
        at_k.data[2] += k * src_step;
        for_each_run(at_k, begin, end, [&](char** p, const int64_t* s, int64_t n) {
          for (int64_t i = 0; i < n; ++i) {
            const int64_t j = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
            if (j < 0 || j >= size) {
              bad.record(j);
              continue;
            }
            char* target = p[0] + i * s[0] + j * out_step;
            store<T>(target, load<T>(target) + load<T>(p[2] + i * s[2]));
          }
        });
      }
    });
  });
  bad.throw_if_seen("scatter_add", dim, size);
}

}  // namespace kiln::cpu
