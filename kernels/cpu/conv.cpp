// CpuBackend's convolution: vol2col + Eigen GEMM, forward, backward-input and
// backward-weight (Note [Convolution layout] in core/backend.h).
//
// Math, for one sample n and one group g (kernels/cpu/vol2col.h has the column matrix):
//   forward          y[n, g]  [C_out/G, O]      = W[g] [C_out/G, R] x col(x[n, g]) [R, O]
//   backward input   dcol     [R, O]            = W[g]^T x dy[n, g];   dx[n, g] = col2vol(dcol)
//   backward weight  dW[g]    [C_out/G, R]      = sum_n dy[n, g] x col(x[n, g])^T
// where R = C_in/G x prod(k) (rows ordered like the weight's [C_in/G, k...]) and O = prod(o).
//
// Layout: every tensor is contiguous NC<spatial> (the op layer makes it so), 1-3 spatial
// dims, all handled as 3-d (vol2col.h). The channels of group g are contiguous in x, y and
// W, so each (sample, group) block is a plain row-major matrix and Eigen maps it in place.
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
// Threading (OpenMP): forward and backward-input have N x G independent (sample, group)
// units. With at least as many units as threads, threads split the units, each with its
// own column buffer, and Eigen then runs each GEMM on one thread (Eigen stays serial
// inside a parallel region). With fewer units (batch 1 or 2 on a many-core machine) the
// units run in turn; threads split the column build (vol2col by rows, col2vol by input
// channel, so no two threads add into the same element) and Eigen threads the GEMM.
// Backward-weight sums over the batch, deterministically: the batch is concatenated along
// the columns (dy permuted to [C_out, N x O]), so dW[g] is one GEMM over N x O columns,
// accumulated tile by tile in a fixed order. Groups run in parallel when there are at
// least as many as threads (each writes its own slice of dW), in turn otherwise. Calls of
// fewer than kMinParallelWork multiply-adds stay on one thread. The same inputs and thread
// count give bit-identical results.
//
// Dtypes: float32 and float64 through Eigen; float16 and bfloat16 are converted to
// float32, run, and rounded on store (Note [Opmath]).
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <memory>

#include "core/dispatch.h"
#include "core/ops/factory.h"
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

// A growable scratch buffer for column tiles, one per thread (uninitialised memory).
template <typename T>
class ColumnBuffer {
 public:
  T* get(int64_t elements) {
    if (elements > capacity_) {
      data_ = std::make_unique_for_overwrite<T[]>(static_cast<size_t>(elements));
      capacity_ = elements;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
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

// Runs body(i, buffer, parallel_build) for every i in [0, count). With at least as many
// items as threads, threads split the items (each with its own column buffer) and each item
// runs serially inside; otherwise the items run in turn, outside any parallel region, so
// the column build may use threads (parallel_build) and Eigen threads its GEMMs.
// Small problems stay on one thread: below kMinParallelWork multiply-adds a parallel region
// (and, on a loaded machine, waiting for a descheduled thread at its barrier) costs more
// than it saves.
template <typename T, typename Body>
void for_each_unit(int64_t count, int64_t work_per_item, const Body& body) {
  const int threads = omp_get_max_threads();
  if (threads == 1 || count * work_per_item < kMinParallelWork) {
    ColumnBuffer<T> buffer;
    for (int64_t i = 0; i < count; ++i) body(i, buffer, /*parallel_build=*/false);
  } else if (count >= threads) {
#pragma omp parallel
    {
      ColumnBuffer<T> buffer;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < count; ++i) body(i, buffer, /*parallel_build=*/false);
    }
  } else {
    ColumnBuffer<T> buffer;
    for (int64_t i = 0; i < count; ++i) body(i, buffer, /*parallel_build=*/true);
  }
}

// ---- forward ----------------------------------------------------------------------------

template <typename T>
void forward_unit(const ConvProblem& pb, const T* x, const T* w, T* y, ColumnBuffer<T>& buffer,
                  bool parallel_build) {
  const ConvGeometry& g = pb.geometry;
  const int64_t rows = pb.rows(), o = g.out_volume(), co = pb.out_channels;
  const ConstBlock<T> weight = const_block(w, co, rows, rows);
  if (g.is_pointwise()) {
    mutable_block(y, co, o, o).noalias() = weight * const_block(x, rows, o, o);
    return;
  }
  const int64_t width = tile_columns(rows, o);
  T* col = buffer.get(rows * width);
  for (int64_t p0 = 0; p0 < o; p0 += width) {
    const int64_t p1 = std::min(o, p0 + width), n = p1 - p0;
    vol2col(x, g, p0, p1, col, n, parallel_build && rows * n >= kMinParallelColumns);
    mutable_block(y + p0, co, n, o).noalias() = weight * const_block(col, rows, n, n);
  }
}

template <typename T>
void forward(const ConvProblem& pb, const T* x, const T* w, T* y) {
  for_each_unit<T>(pb.units(), pb.unit_work(), [&](int64_t u, ColumnBuffer<T>& buffer, bool parallel_build) {
    forward_unit(pb, x + pb.input_offset(u), w + pb.weight_offset(u % pb.groups), y + pb.output_offset(u),
                 buffer, parallel_build);
  });
}

// ---- backward input ---------------------------------------------------------------------

template <typename T>
void backward_input_unit(const ConvProblem& pb, const T* dy, const T* w, T* dx, ColumnBuffer<T>& buffer,
                         bool parallel_build) {
  const ConvGeometry& g = pb.geometry;
  const int64_t rows = pb.rows(), o = g.out_volume(), co = pb.out_channels;
  const auto weight_t = const_block(w, co, rows, rows).transpose();
  if (g.is_pointwise()) {
    mutable_block(dx, rows, o, o).noalias() = weight_t * const_block(dy, co, o, o);
    return;
  }
  std::fill(dx, dx + g.channels * g.in_volume(), T(0));
  const int64_t width = tile_columns(rows, o);
  T* col = buffer.get(rows * width);
  for (int64_t p0 = 0; p0 < o; p0 += width) {
    const int64_t p1 = std::min(o, p0 + width), n = p1 - p0;
    mutable_block(col, rows, n, n).noalias() = weight_t * const_block(dy + p0, co, n, o);
    col2vol(col, n, g, p0, p1, dx, parallel_build && rows * n >= kMinParallelColumns);
  }
}

template <typename T>
void backward_input(const ConvProblem& pb, const T* dy, const T* w, T* dx) {
  for_each_unit<T>(pb.units(), pb.unit_work(), [&](int64_t u, ColumnBuffer<T>& buffer, bool parallel_build) {
    backward_input_unit(pb, dy + pb.output_offset(u), w + pb.weight_offset(u % pb.groups),
                        dx + pb.input_offset(u), buffer, parallel_build);
  });
}

// ---- backward weight --------------------------------------------------------------------

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

// Columns [q0, q1) of group g's concatenated column matrix [R, N x O]: the pieces of the
// samples the range covers, each built by vol2col into its columns of the tile.
template <typename T>
void build_batch_columns(const ConvProblem& pb, const T* x, int64_t group, int64_t q0, int64_t q1, T* col,
                         bool parallel_build) {
  const int64_t o = pb.geometry.out_volume(), ld = q1 - q0;
  for (int64_t n = q0 / o; n * o < q1; ++n) {
    const int64_t p0 = std::max(q0, n * o) - n * o, p1 = std::min(q1, (n + 1) * o) - n * o;
    const T* x_unit = x + pb.input_offset(n * pb.groups + group);
    vol2col(x_unit, pb.geometry, p0, p1, col + (n * o + p0 - q0), ld, parallel_build);
  }
}

template <typename T>
void backward_weight_group(const ConvProblem& pb, const T* dy_cat, const T* x, int64_t group, T* dw,
                           ColumnBuffer<T>& buffer, bool parallel_build) {
  const int64_t rows = pb.rows(), co = pb.out_channels, total = pb.batch * pb.geometry.out_volume();
  MutableBlock<T> grad = mutable_block(dw + pb.weight_offset(group), co, rows, rows);
  grad.setZero();
  const T* dy_group = dy_cat + group * co * total;
  const int64_t width = tile_columns(rows, total);
  T* col = buffer.get(rows * width);
  for (int64_t q0 = 0; q0 < total; q0 += width) {
    const int64_t q1 = std::min(total, q0 + width), n = q1 - q0;
    build_batch_columns(pb, x, group, q0, q1, col, parallel_build && rows * n >= kMinParallelColumns);
    grad.noalias() += const_block(dy_group + q0, co, n, total) * const_block(col, rows, n, n).transpose();
  }
}

template <typename T>
void backward_weight(const ConvProblem& pb, const T* dy, const T* x, T* dw) {
  ColumnBuffer<T> concatenated;
  const T* dy_cat = concatenate_batch(pb, dy, concatenated);
  for_each_unit<T>(pb.groups, pb.batch * pb.unit_work(),
                   [&](int64_t g, ColumnBuffer<T>& buffer, bool parallel_build) {
                     backward_weight_group(pb, dy_cat, x, g, dw, buffer, parallel_build);
                   });
}

// ---- dtypes -----------------------------------------------------------------------------

bool is_half_type(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }

// Note [Opmath]: half types run the float32 kernel on float32 copies of the operands;
// the result is rounded into `out` on the way back.
template <typename Kernel>
void run_in_float32(Backend& cpu, const Tensor& a, const Tensor& b, const Tensor& out, const Kernel& kernel) {
  const auto widen = [&](const Tensor& t) {
    Tensor wide = empty(t.sizes(), {.dtype = DType::Float32});
    cpu.copy(t, wide, /*non_blocking=*/false);
    return wide;
  };
  const Tensor out32 = empty(out.sizes(), {.dtype = DType::Float32});
  kernel(widen(a), widen(b), out32);
  cpu.copy(out32, out, /*non_blocking=*/false);
}

}  // namespace

void CpuBackend::conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params,
                              const Tensor& out) {
  if (is_half_type(input.dtype())) {
    run_in_float32(*this, input, weight, out,
                   [&](const Tensor& x, const Tensor& w, const Tensor& y) { conv_forward(x, w, params, y); });
    return;
  }
  const ConvProblem problem = make_problem(input.sizes(), weight.sizes(), params);
  visit_dtype<kGemmTypes>(input.dtype(), "conv_forward", [&]<typename T>() {
    forward(problem, input.data_ptr<T>(), weight.data_ptr<T>(), out.data_ptr<T>());
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
  const ConvProblem problem = make_problem(grad_input.sizes(), weight.sizes(), params);
  visit_dtype<kGemmTypes>(grad_out.dtype(), "conv_backward_input", [&]<typename T>() {
    backward_input(problem, grad_out.data_ptr<T>(), weight.data_ptr<T>(), grad_input.data_ptr<T>());
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
  const ConvProblem problem = make_problem(input.sizes(), grad_weight.sizes(), params);
  visit_dtype<kGemmTypes>(grad_out.dtype(), "conv_backward_weight", [&]<typename T>() {
    backward_weight(problem, grad_out.data_ptr<T>(), input.data_ptr<T>(), grad_weight.data_ptr<T>());
  });
}

}  // namespace kiln::cpu
