// CpuBackend reductions: sum, mean, amax/amin, norms, var_mean and argmax/argmin, all
// through one engine.
//
// What is reduced is a small op struct (SumOp, ExtremumOp, NormOp, WelfordOp, ArgOp):
//   Acc identity();                         the state of an empty reduction
//   Acc reduce(Acc, value, index);          folds in one element (index: its position
//                                           in the reduced index space, for argmax)
//   Acc combine(Acc, Acc);                  merges two partial states
//   void write(Acc, offset0, offset1);      stores the result(s) of one output
// How the loop runs is the engine's business (run_reduction), shared by every op:
//   1. Layout (make_layout). Dims of size 1 are dropped; the rest split into kept dims
//      (those of the output) and reduced dims. Each group is sorted so that its smallest
//      input stride is innermost, and neighbours contiguous with each other are merged: a
//      contiguous [N, C, H, W] reduced over {H, W} becomes kept [N*C] x reduced [H*W].
//   2. Loop order (accumulate), picked by layout:
//      inner reduction: the innermost reduced dim has the smaller input stride, so each
//        output's elements lie along a (nearly) contiguous row: one accumulator per
//        output, folded along the row with kLanes independent lanes.
//      outer reduction: the innermost kept dim has the smaller stride (a sum over dim 0
//        of a row-major matrix): a tile of neighbouring outputs keeps a vector of
//        accumulators, and each reduced index adds one contiguous slice of a row to it.
//   3. Parallelism (run_reduction). With enough outputs, threads split the outputs, and
//      each output is reduced by one thread. With fewer outputs than threads and a long
//      reduction (a full sum), threads split the reduced range instead; their partial
//      states are merged with combine() in thread order, so a run is reproducible for a
//      given thread count.
//
// Note [Reduction accumulators]: sums of floating values (sum, mean, the norms, Welford's
// mean and M2) accumulate in double for every floating dtype, float16 to float64. On a
// CPU a double add costs what a float add costs, and double's 29 extra mantissa bits
// make the sum of 10^8 float32 values exact to float32 precision, with no pairwise or
// Kahan bookkeeping. Integer and bool sums accumulate in int64 and write int64 (the op
// layer allocates an int64 output). Max/min keep the input's opmath type, which is exact.
//
// NaN: max, min and the inf-norm propagate NaN (once NaN, always NaN), as PyTorch.
// argmax/argmin treat NaN as the extremum and return the index of the first one; ties
// otherwise go to the first index too.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_engine.h"  // parallel_for, kGrain

namespace kiln::cpu {
namespace {

// ==== the ops: what is reduced ===========================================================

template <typename V>
bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Note [Reduction accumulators]: double for floating inputs, int64 for integers and bool.
template <typename T>
using SumAcc = std::conditional_t<is_floating_v<T>, double, int64_t>;

// Rounds an accumulator into a storage type (double -> float -> Half for half types).
template <typename Out, typename Acc>
Out round_to(Acc a) {
  return static_cast<Out>(static_cast<opmath_t<Out>>(a));
}

// sum, and mean when `divisor` is the count (floating inputs only).
template <typename T, typename Out>
struct SumOp {
  using In = T;
  using Acc = SumAcc<T>;
  Out* out;
  double divisor = 1.0;
  bool is_mean = false;
  Acc identity() const { return Acc(0); }
  Acc reduce(Acc a, opmath_t<T> v, int64_t) const { return a + static_cast<Acc>(v); }
  Acc combine(Acc a, Acc b) const { return a + b; }
  void write(Acc a, int64_t o, int64_t) const {
    if constexpr (is_floating_v<T>) {
      out[o] = round_to<Out>(is_mean ? a / divisor : a);
    } else {
      out[o] = static_cast<Out>(a);
    }
  }
};

// amax (kMax) and amin. The identity is -inf/+inf (or the integer limits), so that any
// value, -inf included, replaces it.
template <typename T, bool kMax>
struct ExtremumOp {
  using In = T;
  using Acc = opmath_t<T>;
  T* out;
  Acc identity() const {
    if constexpr (std::is_floating_point_v<Acc>) {
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  }
  Acc reduce(Acc a, Acc v, int64_t) const {
    // Once a is NaN, no comparison with it is true and it stays.
    return (is_nan(v) || (kMax ? v > a : v < a)) ? v : a;
  }
  Acc combine(Acc a, Acc b) const { return reduce(a, b, 0); }
  void write(Acc a, int64_t o, int64_t) const { out[o] = static_cast<T>(a); }
};

// Vector norms. One = sum |x|, Two = sqrt(sum x^2), P = (sum |x|^p)^(1/p) for p > 0 (the
// op layer checks), Inf = max |x| (NaN-propagating). p = 1 and 2 have their own kinds to
// keep pow() out of their loops.
enum class NormKind { One, Two, P, Inf };

template <typename T, NormKind K>
struct NormOp {
  using In = T;
  using Acc = double;
  T* out;
  double p = 2.0;
  Acc identity() const { return 0.0; }
  Acc reduce(Acc a, opmath_t<T> v, int64_t) const {
    const double x = static_cast<double>(v);
    if constexpr (K == NormKind::One) {
      return a + std::abs(x);
    } else if constexpr (K == NormKind::Two) {
      return a + x * x;
    } else if constexpr (K == NormKind::P) {
      return a + std::pow(std::abs(x), p);
    } else {
      return combine(a, std::abs(x));
    }
  }
  Acc combine(Acc a, Acc b) const {
    if constexpr (K == NormKind::Inf) {
      return (std::isnan(b) || b > a) ? b : a;  // NaN propagates, as in ExtremumOp
    } else {
      return a + b;
    }
  }
  void write(Acc a, int64_t o, int64_t) const {
    if constexpr (K == NormKind::Two) a = std::sqrt(a);
    if constexpr (K == NormKind::P) a = std::pow(a, 1.0 / p);
    out[o] = round_to<T>(a);
  }
};

// Welford's running mean and M2 (sum of squared deviations from the mean): one pass, and
// no cancellation as in E[x^2] - E[x]^2. Partial states merge by Chan et al.'s formula.
struct WelfordState {
  double mean = 0.0;
  double m2 = 0.0;
  int64_t count = 0;
};

template <typename T>
struct WelfordOp {
  using In = T;
  using Acc = WelfordState;
  T* var_out;
  T* mean_out;
  int64_t correction = 1;
  Acc identity() const { return {}; }
  Acc reduce(Acc s, opmath_t<T> v, int64_t) const {
    const double x = static_cast<double>(v);
    s.count += 1;
    const double delta = x - s.mean;
    s.mean += delta / static_cast<double>(s.count);
    s.m2 += delta * (x - s.mean);
    return s;
  }
  Acc combine(Acc a, Acc b) const {
    if (a.count == 0) return b;
    if (b.count == 0) return a;
    const double na = static_cast<double>(a.count), nb = static_cast<double>(b.count);
    const double n = na + nb;
    const double delta = b.mean - a.mean;
    return {a.mean + delta * (nb / n), a.m2 + b.m2 + delta * delta * (na * nb / n), a.count + b.count};
  }
  void write(const Acc& s, int64_t var_offset, int64_t mean_offset) const {
    // As PyTorch: divisor max(0, N - correction); 0 gives inf (or NaN when M2 is 0 too).
    const double divisor = static_cast<double>(std::max<int64_t>(0, s.count - correction));
    var_out[var_offset] = round_to<T>(s.m2 / divisor);
    mean_out[mean_offset] = round_to<T>(s.count > 0 ? s.mean : std::numeric_limits<double>::quiet_NaN());
  }
};

// argmax (kMax) / argmin with the value: the first extremum, NaN counting as the extremum.
template <typename V>
struct ArgState {
  V value{};
  int64_t index = -1;  // -1: no element seen yet
};

template <typename T, bool kMax>
struct ArgOp {
  using In = T;
  using V = opmath_t<T>;
  using Acc = ArgState<V>;
  T* values;
  int64_t* indices;
  // Whether v beats the current best (strictly: a tie keeps the earlier index).
  static bool better(V v, V best) {
    if (is_nan(best)) return false;
    return is_nan(v) || (kMax ? v > best : v < best);
  }
  Acc identity() const { return {}; }
  Acc reduce(Acc a, V v, int64_t index) const {
    return (a.index < 0 || better(v, a.value)) ? Acc{v, index} : a;
  }
  Acc combine(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (better(b.value, a.value)) return b;
    if (better(a.value, b.value)) return a;
    return a.index <= b.index ? a : b;  // equal, or both NaN
  }
  void write(const Acc& a, int64_t value_offset, int64_t index_offset) const {
    values[value_offset] = static_cast<T>(a.value);
    indices[index_offset] = a.index;
  }
};

// ==== the layout: which elements meet which output ========================================

inline constexpr int kMaxRank = 64;

// One loop dim: its size and element strides in the input and in up to two outputs.
struct LoopDim {
  int64_t size;
  std::array<int64_t, 3> strides;  // input, output 0, output 1
};

// Dims walked as one row-major index space, outermost first.
using DimGroup = std::vector<LoopDim>;

struct ReductionLayout {
  DimGroup kept;     // never empty: a lone size-1 dim when everything is reduced
  DimGroup reduced;  // never empty: a lone size-1 dim when nothing is
  int64_t kept_numel = 1;
  int64_t reduced_numel = 1;
  bool outer = false;  // the loop order (see the file header)
};

// Sorts by input stride, largest first (stable: ties keep their order), then merges each
// dim into its outer neighbour when they are contiguous with each other in every operand.
DimGroup sort_and_coalesce(DimGroup group) {
  std::stable_sort(group.begin(), group.end(),
                   [](const LoopDim& a, const LoopDim& b) { return a.strides[0] > b.strides[0]; });
  DimGroup merged;
  for (const LoopDim& dim : group) {
    if (!merged.empty()) {
      LoopDim& outer = merged.back();
      bool contiguous = true;
      for (int k = 0; k < 3; ++k) contiguous = contiguous && outer.strides[k] == dim.strides[k] * dim.size;
      if (contiguous) {
        outer.size *= dim.size;
        outer.strides = dim.strides;
        continue;
      }
    }
    merged.push_back(dim);
  }
  if (merged.empty()) merged.push_back({1, {0, 0, 0}});
  return merged;
}

int64_t numel_of(const DimGroup& group) {
  int64_t n = 1;
  for (const LoopDim& dim : group) n *= dim.size;
  return n;
}

// `reduce_dims` sorted; out0/out1 in keepdim form (out1 may be null).
ReductionLayout make_layout(const Tensor& in, const std::vector<int64_t>& reduce_dims, const Tensor& out0,
                            const Tensor* out1) {
  KILN_CHECK(in.dim() <= kMaxRank, "reduce: at most ", kMaxRank, " dimensions are supported, got ", in.dim());
  DimGroup kept, reduced;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const int64_t size = in.sizes()[d];
    if (size == 1) continue;
    if (std::binary_search(reduce_dims.begin(), reduce_dims.end(), d)) {
      reduced.push_back({size, {in.strides()[d], 0, 0}});
    } else {
      kept.push_back({size, {in.strides()[d], out0.strides()[d], out1 ? out1->strides()[d] : 0}});
    }
  }
  const bool has_kept = !kept.empty(), has_reduced = !reduced.empty();
  ReductionLayout layout;
  layout.kept = sort_and_coalesce(std::move(kept));
  layout.reduced = sort_and_coalesce(std::move(reduced));
  layout.kept_numel = numel_of(layout.kept);
  layout.reduced_numel = numel_of(layout.reduced);
  layout.outer = has_kept && (!has_reduced || layout.kept.back().strides[0] < layout.reduced.back().strides[0]);
  return layout;
}

// Calls fn(offsets, first, count) for each run along the innermost dim of `group` that
// together make up its row-major indices [begin, end). `offsets` are the element offsets
// (input, output 0, output 1) of index `first`; the run steps by group.back().strides.
template <typename Fn>
void for_each_run(const DimGroup& group, int64_t begin, int64_t end, const Fn& fn) {
  if (begin >= end) return;
  const int nd = static_cast<int>(group.size());
  const int64_t inner = group.back().size;
  std::array<int64_t, kMaxRank> index;
  int64_t rest = begin / inner;
  for (int d = nd - 2; d >= 0; --d) {
    index[d] = rest % group[d].size;
    rest /= group[d].size;
  }
  int64_t position = begin % inner;
  int64_t first = begin;
  while (first < end) {
    std::array<int64_t, 3> offsets{};
    for (int k = 0; k < 3; ++k) {
      int64_t offset = position * group.back().strides[k];
      for (int d = 0; d < nd - 1; ++d) offset += index[d] * group[d].strides[k];
      offsets[k] = offset;
    }
    const int64_t count = std::min(inner - position, end - first);
    fn(offsets, first, count);
    first += count;
    position = 0;
    for (int d = nd - 2; d >= 0; --d) {
      if (++index[d] < group[d].size) break;
      index[d] = 0;
    }
  }
}

// ==== the engine: how the loop runs =======================================================

// Independent accumulators along a row: they break the chain of dependent adds (each add
// waits for the previous one otherwise), so the CPU overlaps them.
inline constexpr int kLanes = 4;
// Outputs whose accumulators one thread holds at a time (a few KiB: stays in L1).
inline constexpr int64_t kTile = 2048;

// Folds the `count` elements p[0], p[stride], ... (reduced indices first, first + 1, ...)
// into acc.
template <typename Op>
typename Op::Acc reduce_run(const Op& op, typename Op::Acc acc, const typename Op::In* p, int64_t stride,
                            int64_t first, int64_t count) {
  using Acc = typename Op::Acc;
  using V = opmath_t<typename Op::In>;
  int64_t j = 0;
  if (count >= 4 * kLanes) {
    std::array<Acc, kLanes> lanes;
    lanes.fill(op.identity());
    for (; j + kLanes <= count; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) lanes[l] = op.reduce(lanes[l], static_cast<V>(p[(j + l) * stride]), first + j + l);
    }
    for (const Acc& lane : lanes) acc = op.combine(acc, lane);
  }
  for (; j < count; ++j) acc = op.reduce(acc, static_cast<V>(p[j * stride]), first + j);
  return acc;
}

// Folds the reduced indices [rb, re) into the accumulators of outputs [kb, ke)
// (accs[0] belongs to output kb), in the layout's loop order.
template <typename Op>
void accumulate(const ReductionLayout& layout, const Op& op, const typename Op::In* in, int64_t kb, int64_t ke,
                int64_t rb, int64_t re, typename Op::Acc* accs) {
  using V = opmath_t<typename Op::In>;
  const int64_t kept_stride = layout.kept.back().strides[0];
  const int64_t reduced_stride = layout.reduced.back().strides[0];
  if (!layout.outer) {
    for_each_run(layout.kept, kb, ke, [&](const auto& kept_offsets, int64_t kept_first, int64_t kept_count) {
      for (int64_t c = 0; c < kept_count; ++c) {
        auto& acc = accs[kept_first - kb + c];
        const auto* base = in + kept_offsets[0] + c * kept_stride;
        for_each_run(layout.reduced, rb, re, [&](const auto& offsets, int64_t first, int64_t count) {
          acc = reduce_run(op, acc, base + offsets[0], reduced_stride, first, count);
        });
      }
    });
    return;
  }
  for_each_run(layout.reduced, rb, re, [&](const auto& reduced_offsets, int64_t reduced_first, int64_t reduced_count) {
    for (int64_t r = 0; r < reduced_count; ++r) {
      const auto* row = in + reduced_offsets[0] + r * reduced_stride;
      const int64_t index = reduced_first + r;
      for_each_run(layout.kept, kb, ke, [&](const auto& offsets, int64_t first, int64_t count) {
        auto* a = accs + (first - kb);
        const auto* p = row + offsets[0];
        if (kept_stride == 1) {  // the common case, spelled out so the compiler vectorizes it
          for (int64_t c = 0; c < count; ++c) a[c] = op.reduce(a[c], static_cast<V>(p[c]), index);
        } else {
          for (int64_t c = 0; c < count; ++c) a[c] = op.reduce(a[c], static_cast<V>(p[c * kept_stride]), index);
        }
      });
    }
  });
}

template <typename Op>
void write_outputs(const ReductionLayout& layout, const Op& op, int64_t kb, int64_t ke, const typename Op::Acc* accs) {
  const auto& inner_strides = layout.kept.back().strides;
  for_each_run(layout.kept, kb, ke, [&](const auto& offsets, int64_t first, int64_t count) {
    for (int64_t c = 0; c < count; ++c) {
      op.write(accs[first - kb + c], offsets[1] + c * inner_strides[1], offsets[2] + c * inner_strides[2]);
    }
  });
}

// Threads split the outputs; each thread works through its outputs a tile at a time.
template <typename Op>
void reduce_by_outputs(const ReductionLayout& layout, const Op& op, const typename Op::In* in) {
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, layout.reduced_numel));
  parallel_for(layout.kept_numel, grain, [&](int64_t begin, int64_t end) {
    // unique_ptr, not vector: vector<bool> (all/any's accumulator) has no data().
    const auto accs = std::make_unique<typename Op::Acc[]>(std::min(kTile, end - begin));
    for (int64_t tile = begin; tile < end; tile += kTile) {
      const int64_t tile_end = std::min(end, tile + kTile);
      std::fill(accs.get(), accs.get() + (tile_end - tile), op.identity());
      accumulate(layout, op, in, tile, tile_end, 0, layout.reduced_numel, accs.get());
      write_outputs(layout, op, tile, tile_end, accs.get());
    }
  });
}

// Threads split the reduced range; partial states are merged in thread order.
template <typename Op>
void reduce_by_splitting(const ReductionLayout& layout, const Op& op, const typename Op::In* in, int64_t parts) {
  const int64_t outputs = layout.kept_numel;
  const int64_t chunk = (layout.reduced_numel + parts - 1) / parts;
  const auto partial = std::make_unique<typename Op::Acc[]>(parts * outputs);
  std::fill(partial.get(), partial.get() + parts * outputs, op.identity());
  parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      const int64_t rb = std::min(layout.reduced_numel, part * chunk);
      const int64_t re = std::min(layout.reduced_numel, rb + chunk);
      accumulate(layout, op, in, 0, outputs, rb, re, partial.get() + part * outputs);
    }
  });
  for (int64_t part = 1; part < parts; ++part) {
    for (int64_t k = 0; k < outputs; ++k) partial[k] = op.combine(partial[k], partial[part * outputs + k]);
  }
  write_outputs(layout, op, 0, outputs, partial.get());
}

template <typename Op>
void run_reduction(const ReductionLayout& layout, const Op& op, const typename Op::In* in) {
  if (layout.kept_numel == 0) return;
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t parts = std::min(threads, layout.reduced_numel / kGrain);
  if (layout.kept_numel < threads && parts > 1) {
    reduce_by_splitting(layout, op, in, parts);
  } else {
    reduce_by_outputs(layout, op, in);
  }
}

// ==== dispatch: an op struct per ReduceOp and dtype =======================================

template <typename T>
const T* input_data(const Tensor& in) {
  return static_cast<const T*>(in.data_ptr());
}

template <typename T>
T* output_data(const Tensor& out, const char* op) {
  KILN_ASSERT(out.dtype() == dtype_of_v<T>, op, ": output dtype ", out.dtype(), ", expected ", dtype_of_v<T>);
  return static_cast<T*>(out.data_ptr());
}

void sum_or_mean(const Tensor& in, const ReductionLayout& layout, const Tensor& out, bool mean) {
  const char* name = mean ? "mean" : "sum";
  auto run = [&]<typename T>() {
    using Out = std::conditional_t<is_floating_v<T>, T, int64_t>;
    SumOp<T, Out> op{output_data<Out>(out, name), static_cast<double>(layout.reduced_numel), mean};
    run_reduction(layout, op, input_data<T>(in));
  };
  if (mean) {
    visit_dtype<kFloatingTypes>(in.dtype(), name, run);
  } else {
    visit_dtype<kAllTypes>(in.dtype(), name, run);
  }
}

template <bool kMax>
void extremum(const Tensor& in, const ReductionLayout& layout, const Tensor& out) {
  const char* name = kMax ? "amax" : "amin";
  visit_dtype<kAllTypes>(in.dtype(), name, [&]<typename T>() {
    run_reduction(layout, ExtremumOp<T, kMax>{output_data<T>(out, name)}, input_data<T>(in));
  });
}

void vector_norm(const Tensor& in, const ReductionLayout& layout, const Tensor& out, double p) {
  visit_dtype<kFloatingTypes>(in.dtype(), "norm", [&]<typename T>() {
    T* o = output_data<T>(out, "norm");
    const T* x = input_data<T>(in);
    if (std::isinf(p)) {
      run_reduction(layout, NormOp<T, NormKind::Inf>{o, p}, x);
    } else if (p == 1.0) {
      run_reduction(layout, NormOp<T, NormKind::One>{o, p}, x);
    } else if (p == 2.0) {
      run_reduction(layout, NormOp<T, NormKind::Two>{o, p}, x);
    } else {
      run_reduction(layout, NormOp<T, NormKind::P>{o, p}, x);
    }
  });
}

void check_cpu(const Tensor& in, const Tensor& out, const char* op) {
  KILN_ASSERT(in.device().is_cpu() && out.device().is_cpu(), op, " on ", in.device(), " -> ", out.device());
  KILN_ASSERT(in.dim() == out.dim(), op, ": output must be in keepdim form, got ", out.sizes(), " for input ",
              in.sizes());
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& in, const std::vector<int64_t>& reduce_dims, const Tensor& out,
                        const ReduceParams& params) {
  check_cpu(in, out, op_name(op));
  const ReductionLayout layout = make_layout(in, reduce_dims, out, nullptr);
  switch (op) {
    case ReduceOp::Sum: return sum_or_mean(in, layout, out, /*mean=*/false);
    case ReduceOp::Mean: return sum_or_mean(in, layout, out, /*mean=*/true);
    case ReduceOp::Max: return extremum<true>(in, layout, out);
    case ReduceOp::Min: return extremum<false>(in, layout, out);
    case ReduceOp::NormP: return vector_norm(in, layout, out, params.p);
    case ReduceOp::NormInf: return vector_norm(in, layout, out, std::numeric_limits<double>::infinity());
  }
}

void CpuBackend::var_mean(const Tensor& in, const std::vector<int64_t>& reduce_dims, int64_t correction,
                          const Tensor& var_out, const Tensor& mean_out) {
  check_cpu(in, var_out, "var_mean");
  const ReductionLayout layout = make_layout(in, reduce_dims, var_out, &mean_out);
  visit_dtype<kFloatingTypes>(in.dtype(), "var_mean", [&]<typename T>() {
    WelfordOp<T> op{output_data<T>(var_out, "var_mean"), output_data<T>(mean_out, "var_mean"), correction};
    run_reduction(layout, op, input_data<T>(in));
  });
}

void CpuBackend::arg_reduce(ArgReduceOp op, const Tensor& in, int64_t dim, const Tensor& values_out,
                            const Tensor& indices_out) {
  const bool is_max = op == ArgReduceOp::ArgMax;
  const char* name = is_max ? "argmax" : "argmin";
  check_cpu(in, values_out, name);
  const ReductionLayout layout = make_layout(in, {dim}, values_out, &indices_out);
  visit_dtype<kAllTypes>(in.dtype(), name, [&]<typename T>() {
    T* values = output_data<T>(values_out, name);
    int64_t* indices = output_data<int64_t>(indices_out, name);
    if (is_max) {
      run_reduction(layout, ArgOp<T, true>{values, indices}, input_data<T>(in));
    } else {
      run_reduction(layout, ArgOp<T, false>{values, indices}, input_data<T>(in));
    }
  });
}

}  // namespace kiln::cpu
