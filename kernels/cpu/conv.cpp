// CpuBackend's convolution: vol2col + Eigen GEMM, forward, backward-input and
// backward-weight (Note [Convolution layout] in core/backend.h). Float32 calls go to
// oneDNN when the build has it and it is enabled (Note [oneDNN convolutions],
// conv_onednn.h); this file is then the reference they are tested against, and the path
// for float64.
//
// Math, for one sample n and one group g (kernels/cpu/vol2col.h has the column matrix):
//   forward          y[n, g]  [C_out/G, O]      = W[g] [C_out/G, R] x col(x[n, g]) [R, O]
//   backward input   dcol     [R, O]            = W[g]^T x dy[n, g];   dx[n, g] = col2vol(dcol)
//   backward weight  dW[g]    [C_out/G, R]      = sum_n dy[n, g] x col(x[n, g])^T
// where R = C_in/G x prod(k) (rows ordered like the weight's [C_in/G, k...]) and O = prod(o).
//
// Layout: the kernels here take contiguous NC<spatial> tensors, 1-3 spatial dims, all
// handled as 3-d (vol2col.h); channels-last operands are converted for them (Note
// [Reference convolution layout]) or, in float32, go to oneDNN as they are. The channels
// of group g are contiguous in x, y and W, so each (sample, group) block is a plain
// row-major matrix and Eigen maps it in place.
// Every kernel overwrites its output (=): backward-input zeroes dx before col2vol adds into
// it, backward-weight zeroes dW before summing the batch into it.
//
// Note [Column tiles]: the column matrix is R x O, which for a 3-d stem (R = 3 x 7^3,
// O = 32^3) is over 100 MiB. It is built a tile of output positions at a time, at most
// kColumnTileElements entries, and each tile is one GEMM writing (or reading) the matching
// columns of y or dy, so memory stays bounded and the tile stays near the cache. A 1x1
// convolution with stride 1 and no padding skips vol2col: the input already is its column
// matrix (and dx = W^T dy needs no col2vol); backward-weight builds its columns anyway,
// since a tile may span samples (vol2col is then a plain copy).
//
// Threading (OpenMP, Note [Convolution work items]): each pass is cut into independent
// items that write disjoint parts of its output: forward, (sample, group, range of output
// columns); backward-input, (sample, group, range of input channels), whose rows of dcol
// come from the matching columns of W[g] and land only in those channels of dx;
// backward-weight, (group, range of weight rows), each summing the whole batch. Threads
// split the items, one parallel region per call, each thread with its own column buffer,
// and Eigen runs each GEMM serially inside. Only when the work cannot be cut into enough
// items do the items run in turn, with the column build split by rows (vol2col) or input
// channels (col2vol) and Eigen threading the GEMM. Calls of fewer than kMinParallelWork
// multiply-adds open no parallel region of their own (Eigen still threads a product past
// its own size threshold).
//
// Backward-weight sums over the batch deterministically: the batch is concatenated along
// the columns (dy permuted to [C_out, N x O] first, a parallel copy of its own), so each
// item is one GEMM over N x O columns, accumulated tile by tile in a fixed order. With the
// same inputs and thread count every pass gives bit-identical results.
//
// Dtypes: float32 and float64 through Eigen; float16 and bfloat16 are converted to
// float32, run, and rounded on store (Note [Opmath]).
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstring>

#include "core/dispatch.h"
#include "core/kernel_memory.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/vol2col.h"

namespace kiln::cpu {
namespace {

constexpr DTypeSet kGemmTypes = dtype_set(DType::Float32) | dtype_set(DType::Float64);

// Note [Column tiles]: 2^21 entries (8 MiB of float32) per tile, but never fewer than 64
// columns, so each GEMM stays large enough to run at full speed.
constexpr int64_t kColumnTileElements = int64_t{1} << 21;
constexpr int64_t kMinTileColumns = 64;
// Threads are used only for calls of at least this many multiply-adds, and the column build
// is split only for tiles of at least this many entries.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;
constexpr int64_t kMinParallelColumns = int64_t{1} << 15;
// Backward-weight items own at least this many weight rows (columns of dW[g]).
constexpr int64_t kMinPieceRows = 8;

int64_t tile_columns(int64_t rows, int64_t total_columns) {
  return std::min(total_columns, std::max(kMinTileColumns, kColumnTileElements / rows));
}

// ---- Eigen views ------------------------------------------------------------------------

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstBlock = Eigen::Map<const RowMajorMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using MutableBlock = Eigen::Map<RowMajorMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// A rows x cols row-major block whose rows are `ld` elements apart.
template <typename T>
ConstBlock<T> const_block(const T* data, int64_t rows, int64_t cols, int64_t ld) {
  return ConstBlock<T>(data, rows, cols, Eigen::OuterStride<>(ld));
}
template <typename T>
MutableBlock<T> mutable_block(T* data, int64_t rows, int64_t cols, int64_t ld) {
  return MutableBlock<T>(data, rows, cols, Eigen::OuterStride<>(ld));
}

// A growable scratch buffer for column tiles, one per thread (uninitialised memory). It
// comes from the CPU allocator's cache (Note [CPU caching allocator] in core/allocator.cpp),
// so the next call finds its pages mapped instead of faulting a fresh buffer in.
template <typename T>
class ColumnBuffer {
 public:
  T* get(int64_t elements) {
    if (elements > capacity_) {
      storage_ = allocate_workspace(elements * static_cast<int64_t>(sizeof(T)), Device::cpu());
      capacity_ = elements;
    }
    return static_cast<T*>(storage_.data_ptr());
  }

 private:
  Tensor storage_;
  int64_t capacity_ = 0;
};

// ---- the problem ------------------------------------------------------------------------

// The whole call: the per-(sample, group) geometry and how the blocks are laid out.
struct ConvProblem {
  ConvGeometry geometry;
  int64_t batch = 0;
  int64_t groups = 1;
  int64_t out_channels = 0;  // per group: C_out / G

  int64_t rows() const { return geometry.col_rows(); }
  int64_t units() const { return batch * groups; }
  // Multiply-adds of one (sample, group) unit in any of the three passes.
  int64_t unit_work() const { return out_channels * rows() * geometry.out_volume(); }
  // Offsets of unit (n, g)'s blocks: x[n, g] [C_in/G, S], y[n, g] [C_out/G, O], W[g].
  int64_t input_offset(int64_t unit) const { return unit * geometry.channels * geometry.in_volume(); }
  int64_t output_offset(int64_t unit) const { return unit * out_channels * geometry.out_volume(); }
  int64_t weight_offset(int64_t group) const { return group * out_channels * rows(); }
};

// input [N, C_in, s...], weight [C_out, C_in/G, k...]; spatial dims right-aligned in 3-d.
ConvProblem make_problem(const std::vector<int64_t>& input_sizes, const std::vector<int64_t>& weight_sizes,
                         const ConvParams& params) {
  ConvProblem problem;
  problem.batch = input_sizes[0];
  problem.groups = params.groups;
  problem.out_channels = weight_sizes[0] / params.groups;
  ConvGeometry& g = problem.geometry;
  g.channels = weight_sizes[1];
  const size_t spatial = input_sizes.size() - 2, lead = 3 - spatial;
  for (size_t i = 0; i < spatial; ++i) {
    const size_t d = lead + i;
    g.in[d] = input_sizes[2 + i];
    g.kernel[d] = weight_sizes[2 + i];
    g.stride[d] = params.stride[i];
    g.padding[d] = params.padding[i];
    g.dilation[d] = params.dilation[i];
    g.out[d] = (g.in[d] + 2 * g.padding[d] - g.dilation[d] * (g.kernel[d] - 1) - 1) / g.stride[d] + 1;
  }
  return problem;
}

// ---- splitting the work ------------------------------------------------------------------

// Piece i of [0, extent) cut into `pieces` near-equal ranges.
struct Range {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};
Range piece(int64_t extent, int64_t pieces, int64_t i) {
  return {extent * i / pieces, extent * (i + 1) / pieces};
}

// Note [Convolution work items]: a pass is cut into independent items, each computing its
// own part of the output with no other item touching it, so the items may run on any
// threads in any order and the result is the same. Each of `units` (samples x groups, or
// groups for backward-weight) is cut into enough pieces of `extent` (output columns,
// input channels, weight rows) that every thread gets an item, but no piece is smaller
// than `min_piece`. Small calls (under kMinParallelWork multiply-adds) are not cut.
int64_t pieces_per_unit(int64_t units, int64_t extent, int64_t min_piece, int64_t total_work) {
  const int64_t threads = omp_get_max_threads();
  if (threads == 1 || total_work < kMinParallelWork) return 1;
  const int64_t wanted = (threads + units - 1) / units;
  return std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, extent / min_piece));
}

// Runs body(i, buffer, parallel_inside) for every item i in [0, count). With at least as
// many items as threads, threads split the items (each thread with its own column buffer)
// and each item runs serially: one parallel region per call, and Eigen stays serial inside
// it. Otherwise (an extent too small to cut, or a small call) the items run in turn outside
// any parallel region, and parallel_inside lets the column build and Eigen's GEMM use the
// threads.
template <typename T, typename Body>
void for_each_item(int64_t count, int64_t total_work, const Body& body) {
  const int threads = omp_get_max_threads();
  const bool parallel = threads > 1 && total_work >= kMinParallelWork;
  if (parallel && count >= threads) {
#pragma omp parallel
    {
      ColumnBuffer<T> buffer;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < count; ++i) body(i, buffer, /*parallel_inside=*/false);
    }
  } else {
    ColumnBuffer<T> buffer;
    for (int64_t i = 0; i < count; ++i) body(i, buffer, /*parallel_inside=*/parallel);
  }
}

// Whether a column block is worth splitting between threads (when the item may).
bool split_build(bool parallel_inside, int64_t entries) {
  return parallel_inside && entries >= kMinParallelColumns;
}

// ---- forward: items are (sample, group, range of output columns) -----------------------

template <typename T>
void forward_piece(const ConvProblem& pb, const T* x, const T* w, T* y, Range cols, ColumnBuffer<T>& buffer,
                   bool parallel_inside) {
  const ConvGeometry& g = pb.geometry;
  const int64_t rows = pb.rows(), o = g.out_volume(), co = pb.out_channels;
  const ConstBlock<T> weight = const_block(w, co, rows, rows);
  if (g.is_pointwise()) {
    mutable_block(y + cols.begin, co, cols.size(), o).noalias() =
        weight * const_block(x + cols.begin, rows, cols.size(), o);
    return;
  }
  const int64_t width = tile_columns(rows, cols.size());
  T* col = buffer.get(rows * width);
  for (int64_t p0 = cols.begin; p0 < cols.end; p0 += width) {
    const int64_t p1 = std::min(cols.end, p0 + width), n = p1 - p0;
    vol2col(x, g, {0, rows, p0, p1}, col, n, split_build(parallel_inside, rows * n));
    mutable_block(y + p0, co, n, o).noalias() = weight * const_block(col, rows, n, n);
  }
}

template <typename T>
void forward(const ConvProblem& pb, const T* x, const T* w, T* y) {
  const int64_t o = pb.geometry.out_volume(), work = pb.units() * pb.unit_work();
  const int64_t pieces = pieces_per_unit(pb.units(), o, kMinTileColumns, work);
  for_each_item<T>(pb.units() * pieces, work, [&](int64_t i, ColumnBuffer<T>& buffer, bool parallel_inside) {
    const int64_t u = i / pieces;
    forward_piece(pb, x + pb.input_offset(u), w + pb.weight_offset(u % pb.groups), y + pb.output_offset(u),
                  piece(o, pieces, i % pieces), buffer, parallel_inside);
  });
}

// ---- backward input: items are (sample, group, range of input channels) -----------------

// The channels' rows of dcol = W[g]^T dy come from the matching columns of W[g]; col2vol
// adds them into those channels of dx only.
template <typename T>
void backward_input_piece(const ConvProblem& pb, const T* dy, const T* w, T* dx, Range channels,
                          ColumnBuffer<T>& buffer, bool parallel_inside) {
  const ConvGeometry& g = pb.geometry;
  const int64_t o = g.out_volume(), co = pb.out_channels, taps = g.kernel_volume();
  const int64_t r0 = channels.begin * taps, rows = channels.size() * taps;
  const auto weight_t = const_block(w + r0, co, rows, pb.rows()).transpose();
  if (g.is_pointwise()) {
    mutable_block(dx + channels.begin * g.in_volume(), rows, o, o).noalias() =
        weight_t * const_block(dy, co, o, o);
    return;
  }
  std::fill(dx + channels.begin * g.in_volume(), dx + channels.end * g.in_volume(), T(0));
  const int64_t width = tile_columns(rows, o);
  T* col = buffer.get(rows * width);
  for (int64_t p0 = 0; p0 < o; p0 += width) {
    const int64_t p1 = std::min(o, p0 + width), n = p1 - p0;
    mutable_block(col, rows, n, n).noalias() = weight_t * const_block(dy + p0, co, n, o);
    col2vol(col, n, g, {r0, r0 + rows, p0, p1}, dx, split_build(parallel_inside, rows * n));
  }
}

template <typename T>
void backward_input(const ConvProblem& pb, const T* dy, const T* w, T* dx) {
  const int64_t channels = pb.geometry.channels, work = pb.units() * pb.unit_work();
  const int64_t pieces = pieces_per_unit(pb.units(), channels, 1, work);
  for_each_item<T>(pb.units() * pieces, work, [&](int64_t i, ColumnBuffer<T>& buffer, bool parallel_inside) {
    const int64_t u = i / pieces;
    backward_input_piece(pb, dy + pb.output_offset(u), w + pb.weight_offset(u % pb.groups),
                         dx + pb.input_offset(u), piece(channels, pieces, i % pieces), buffer,
                         parallel_inside);
  });
}

// ---- backward weight: items are (group, range of weight rows) -------------------------

// dy [N, C_out, O] as [C_out, N x O]: the batch concatenated along the columns. Batch 1
// already is; otherwise this copies (a transpose of the two outer dims, O at a time).
template <typename T>
const T* concatenate_batch(const ConvProblem& pb, const T* dy, ColumnBuffer<T>& storage) {
  if (pb.batch == 1) return dy;
  const int64_t c_out = pb.out_channels * pb.groups, o = pb.geometry.out_volume();
  T* out = storage.get(c_out * pb.batch * o);
#pragma omp parallel for schedule(static) if (c_out * pb.batch * o >= kMinParallelColumns)
  for (int64_t c = 0; c < c_out; ++c) {
    for (int64_t n = 0; n < pb.batch; ++n) {
      std::memcpy(out + (c * pb.batch + n) * o, dy + (n * c_out + c) * o, sizeof(T) * static_cast<size_t>(o));
    }
  }
  return out;
}

// Rows [r0, r1) by columns [q0, q1) of group g's concatenated column matrix [R, N x O]:
// the pieces of the samples the columns cover, each built by vol2col into its columns.
template <typename T>
void build_batch_columns(const ConvProblem& pb, const T* x, int64_t group, Range rows, int64_t q0, int64_t q1,
                         T* col, bool parallel) {
  const int64_t o = pb.geometry.out_volume(), ld = q1 - q0;
  for (int64_t n = q0 / o; n * o < q1; ++n) {
    const int64_t p0 = std::max(q0, n * o) - n * o, p1 = std::min(q1, (n + 1) * o) - n * o;
    const T* x_unit = x + pb.input_offset(n * pb.groups + group);
    vol2col(x_unit, pb.geometry, {rows.begin, rows.end, p0, p1}, col + (n * o + p0 - q0), ld, parallel);
  }
}

// dW[g][:, rows] = sum over the N x O columns, one tile at a time in order.
template <typename T>
void backward_weight_piece(const ConvProblem& pb, const T* dy_cat, const T* x, int64_t group, Range rows,
                           T* dw, ColumnBuffer<T>& buffer, bool parallel_inside) {
  const int64_t co = pb.out_channels, total = pb.batch * pb.geometry.out_volume(), r = rows.size();
  MutableBlock<T> grad = mutable_block(dw + pb.weight_offset(group) + rows.begin, co, r, pb.rows());
  grad.setZero();
  const T* dy_group = dy_cat + group * co * total;
  const int64_t width = tile_columns(r, total);
  T* col = buffer.get(r * width);
  for (int64_t q0 = 0; q0 < total; q0 += width) {
    const int64_t q1 = std::min(total, q0 + width), n = q1 - q0;
    build_batch_columns(pb, x, group, rows, q0, q1, col, split_build(parallel_inside, r * n));
    grad.noalias() += const_block(dy_group + q0, co, n, total) * const_block(col, r, n, n).transpose();
  }
}

template <typename T>
void backward_weight(const ConvProblem& pb, const T* dy, const T* x, T* dw) {
  ColumnBuffer<T> concatenated;
  const T* dy_cat = concatenate_batch(pb, dy, concatenated);
  const int64_t work = pb.units() * pb.unit_work();
  const int64_t pieces = pieces_per_unit(pb.groups, pb.rows(), kMinPieceRows, work);
  for_each_item<T>(pb.groups * pieces, work, [&](int64_t i, ColumnBuffer<T>& buffer, bool parallel_inside) {
    backward_weight_piece(pb, dy_cat, x, i / pieces, piece(pb.rows(), pieces, i % pieces), dw, buffer,
                          parallel_inside);
  });
}

// ---- dtypes -----------------------------------------------------------------------------

bool is_half_type(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

// A copy of `t` in `dtype`, laid out as `t` (keep_layout) or row-major (a counted layout
// conversion when t is not), through the backend's own copy.
Tensor copy_for_kernel(Backend& cpu, const Tensor& t, DType dtype, bool keep_layout) {
  Tensor copy = keep_layout ? empty_preserving(t, {.dtype = dtype, .device = Device::cpu()})
                            : allocate_tensor(t.sizes(), dtype, Device::cpu());
  if (!keep_layout) count_layout_conversion(t.sizes(), t.strides(), copy.strides());
  cpu.copy(t, copy, /*non_blocking=*/false);
  return copy;
}

// Note [Opmath]: half types run the float32 kernel on float32 copies of the operands (in
// their own layouts); the result is rounded into `out` on the way back.
template <typename Kernel>
void run_in_float32(Backend& cpu, const Tensor& a, const Tensor& b, const Tensor& out, const Kernel& kernel) {
  const Tensor out32 = empty_preserving(out, {.dtype = DType::Float32, .device = Device::cpu()});
  kernel(copy_for_kernel(cpu, a, DType::Float32, true), copy_for_kernel(cpu, b, DType::Float32, true), out32);
  cpu.copy(out32, out, /*non_blocking=*/false);
}

// Note [Reference convolution layout]: the vol2col + Eigen path computes in row-major
// NC<spatial> only. Channels-last operands that reach it (float64, as in the gradient
// checks, and every dtype in a build without oneDNN) are copied to row-major and the
// result copied back into `out`: layout conversions, counted as such (Note [Layout
// conversions] in core/memory_format.h), which a float32 channels-last model on oneDNN
// never makes.
template <typename Kernel>
void run_row_major(Backend& cpu, const Tensor& a, const Tensor& b, const Tensor& out, const Kernel& kernel) {
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) return kernel(a, b, out);
  const auto row_major = [&](const Tensor& t) {
    return t.is_contiguous() ? t : copy_for_kernel(cpu, t, t.dtype(), false);
  };
  const Tensor out_row_major =
      out.is_contiguous() ? out : allocate_tensor(out.sizes(), out.dtype(), Device::cpu());
  kernel(row_major(a), row_major(b), out_row_major);
  if (out_row_major.data_ptr() != out.data_ptr()) {
    count_layout_conversion(out.sizes(), out_row_major.strides(), out.strides());
    cpu.copy(out_row_major, out, /*non_blocking=*/false);
  }
}

}  // namespace

void CpuBackend::conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params,
                              const Tensor& out) {
  if (is_half_type(input.dtype())) {
    run_in_float32(*this, input, weight, out,
                   [&](const Tensor& x, const Tensor& w, const Tensor& y) { conv_forward(x, w, params, y); });
    return;
  }
  if (onednn::handles(input, weight, out)) return onednn::conv_forward(input, weight, params, out);
  run_row_major(*this, input, weight, out, [&](const Tensor& x, const Tensor& w, const Tensor& y) {
    const ConvProblem problem = make_problem(x.sizes(), w.sizes(), params);
    visit_dtype<kGemmTypes>(x.dtype(), "conv_forward", [&]<typename T>() {
      forward(problem, x.data_ptr<T>(), w.data_ptr<T>(), y.data_ptr<T>());
    });
  });
}

void CpuBackend::conv_backward_input(const Tensor& grad_out, const Tensor& weight, const ConvParams& params,
                                     const Tensor& grad_input) {
  if (is_half_type(grad_out.dtype())) {
    run_in_float32(
        *this, grad_out, weight, grad_input,
        [&](const Tensor& dy, const Tensor& w, const Tensor& dx) { conv_backward_input(dy, w, params, dx); });
    return;
  }
  if (onednn::handles(grad_out, weight, grad_input)) {
    return onednn::conv_backward_input(grad_out, weight, params, grad_input);
  }
  run_row_major(*this, grad_out, weight, grad_input,
                [&](const Tensor& dy, const Tensor& w, const Tensor& dx) {
                  const ConvProblem problem = make_problem(dx.sizes(), w.sizes(), params);
                  visit_dtype<kGemmTypes>(dy.dtype(), "conv_backward_input", [&]<typename T>() {
                    backward_input(problem, dy.data_ptr<T>(), w.data_ptr<T>(), dx.data_ptr<T>());
                  });
                });
}

void CpuBackend::conv_backward_weight(const Tensor& grad_out, const Tensor& input, const ConvParams& params,
                                      const Tensor& grad_weight) {
  if (is_half_type(grad_out.dtype())) {
    run_in_float32(*this, grad_out, input, grad_weight,
                   [&](const Tensor& dy, const Tensor& x, const Tensor& dw) {
                     conv_backward_weight(dy, x, params, dw);
                   });
    return;
  }
  if (onednn::handles(grad_out, input, grad_weight)) {
    return onednn::conv_backward_weight(grad_out, input, params, grad_weight);
  }
  run_row_major(*this, grad_out, input, grad_weight,
                [&](const Tensor& dy, const Tensor& x, const Tensor& dw) {
                  const ConvProblem problem = make_problem(x.sizes(), dw.sizes(), params);
                  visit_dtype<kGemmTypes>(dy.dtype(), "conv_backward_weight", [&]<typename T>() {
                    backward_weight(problem, dy.data_ptr<T>(), x.data_ptr<T>(), dw.data_ptr<T>());
                  });
                });
}

}  // namespace kiln::cpu
