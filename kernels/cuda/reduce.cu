// CudaBackend reductions: sum, mean, amax/amin, norms, var_mean (Welford) and
// argmax/argmin, each an op struct run by the engine of reduce.cuh. The semantics are
// those of the CPU backend (kernels/cpu/reduce.cpp), op for op: identities of empty
// reductions, NaN propagation, first-index ties, output dtypes. Kernels overwrite.
//
// Note [Reduction accumulators] (CUDA): sums (sum, mean, the norms, Welford's mean and
// M2) accumulate in float for float32, float16 and bfloat16 and in double for float64.
// The CPU sums in double, but on a GPU double adds run at 1/2 to 1/64 of float speed and
// doubles would double the registers of every state; float is enough because the GPU's
// sums are naturally blocked: each thread folds a few hundred elements at most, then
// partial sums meet in a tree (shuffles, shared memory, the split's workspace), so the
// rounding error grows like log(n) rather than n. Integer and bool sums accumulate in
// int64 and write int64 (exact). Max/min keep the input's opmath type (exact). The parity
// tests compare with a tolerance that scales with sqrt(n) (tests/cuda/test_cuda_reduce.cpp).
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/reduce.cuh"

namespace kiln::cuda {
namespace {

// ==== the ops: what is reduced ================================================================

template <typename V>
__device__ __forceinline__ bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;
  } else {
    return false;
  }
}

// float math in float, double in double (kiln::pow and friends are tensor ops).
template <typename V>
__device__ __forceinline__ V abs_of(V x) {
  if constexpr (std::is_same_v<V, float>) return fabsf(x); else return ::fabs(x);
}
template <typename V>
__device__ __forceinline__ V sqrt_of(V x) {
  if constexpr (std::is_same_v<V, float>) return sqrtf(x); else return ::sqrt(x);
}
template <typename V>
__device__ __forceinline__ V pow_of(V x, V p) {
  if constexpr (std::is_same_v<V, float>) return powf(x, p); else return ::pow(x, p);
}

// Note [Reduction accumulators] (CUDA): the sum accumulator of input type T.
template <typename T>
using SumAcc = std::conditional_t<is_floating_v<T>, opmath_t<T>, int64_t>;

// sum, and mean (divides by the count; floating inputs only).
template <typename T, typename Out>
struct SumOp {
  using In = T;
  using Acc = SumAcc<T>;
  Out* out;
  Acc divisor;
  bool is_mean;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc reduce(Acc a, opmath_t<T> v, int64_t) const { return a + static_cast<Acc>(v); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ void write(Acc a, int64_t o, int64_t) const { store(out + o, is_mean ? a / divisor : a); }
};

// amax (kMax) and amin; NaN-propagating: once the state is NaN, no comparison replaces it.
template <typename T, bool kMax>
struct ExtremumOp {
  using In = T;
  using Acc = opmath_t<T>;
  T* out;
  __device__ Acc identity() const {
    if constexpr (std::is_floating_point_v<Acc>) {
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  __device__ Acc reduce(Acc a, Acc v, int64_t) const { return (is_nan(v) || (kMax ? v > a : v < a)) ? v : a; }
  __device__ Acc combine(Acc a, Acc b) const { return reduce(a, b, 0); }
  __device__ void write(Acc a, int64_t o, int64_t) const { store(out + o, a); }
};

// Vector norms, as the CPU's NormKind: One = sum |x|, Two = sqrt(sum x^2),
// P = (sum |x|^p)^(1/p), Inf = max |x| (NaN-propagating).
enum class NormKind { One, Two, P, Inf };

template <typename T, NormKind K>
struct NormOp {
  using In = T;
  using Acc = opmath_t<T>;
  T* out;
  Acc p;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc reduce(Acc a, Acc x, int64_t) const {
    if constexpr (K == NormKind::One) {
      return a + abs_of(x);
    } else if constexpr (K == NormKind::Two) {
      return a + x * x;
    } else if constexpr (K == NormKind::P) {
      return a + pow_of(abs_of(x), p);
    } else {
      return combine(a, abs_of(x));
    }
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if constexpr (K == NormKind::Inf) {
      return (is_nan(b) || b > a) ? b : a;
    } else {
      return a + b;
    }
  }
  __device__ void write(Acc a, int64_t o, int64_t) const {
    if constexpr (K == NormKind::Two) a = sqrt_of(a);
    if constexpr (K == NormKind::P) a = pow_of(a, Acc(1) / p);
    store(out + o, a);
  }
};

// Welford's running mean and M2 (sum of squared deviations), merged by Chan et al.'s
// formula; one pass, no cancellation as in E[x^2] - E[x]^2.
template <typename Acc>
struct WelfordState {
  Acc mean = 0;
  Acc m2 = 0;
  int64_t count = 0;
};

template <typename T>
struct WelfordOp {
  using In = T;
  using V = opmath_t<T>;
  using Acc = WelfordState<V>;
  T* var_out;
  T* mean_out;
  int64_t correction;
  __device__ Acc identity() const { return {}; }
  __device__ Acc reduce(Acc s, V x, int64_t) const {
    s.count += 1;
    const V delta = x - s.mean;
    s.mean += delta / static_cast<V>(s.count);
    s.m2 += delta * (x - s.mean);
    return s;
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if (a.count == 0) return b;
    if (b.count == 0) return a;
    const V na = static_cast<V>(a.count), nb = static_cast<V>(b.count), n = na + nb;
    const V delta = b.mean - a.mean;
    return {a.mean + delta * (nb / n), a.m2 + b.m2 + delta * delta * (na * (nb / n)), a.count + b.count};
  }
  __device__ void write(const Acc& s, int64_t var_offset, int64_t mean_offset) const {
    // As the CPU (and PyTorch): divisor max(0, N - correction); 0 gives inf, or NaN when M2 is 0.
    const int64_t divisor = s.count - correction > 0 ? s.count - correction : 0;
    store(var_out + var_offset, s.m2 / static_cast<V>(divisor));
    store(mean_out + mean_offset, s.count > 0 ? s.mean : std::numeric_limits<V>::quiet_NaN());
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
  __device__ static bool better(V v, V best) {
    if (is_nan(best)) return false;
    return is_nan(v) || (kMax ? v > best : v < best);
  }
  __device__ Acc identity() const { return {}; }
  __device__ Acc reduce(Acc a, V v, int64_t index) const {
    return (a.index < 0 || better(v, a.value)) ? Acc{v, index} : a;
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (better(b.value, a.value)) return b;
    if (better(a.value, b.value)) return a;
    return a.index <= b.index ? a : b;  // equal, or both NaN
  }
  __device__ void write(const Acc& a, int64_t value_offset, int64_t index_offset) const {
    store(values + value_offset, a.value);
    indices[index_offset] = a.index;
  }
};

// ==== planning from tensors ===================================================================

bool group_fits(const std::vector<PlanDim>& group, int64_t numel) {
  return group.size() <= static_cast<size_t>(kMaxOffsetDims) && (group.size() == 1 || numel < (int64_t{1} << 31));
}

ReducePlan plan_for(const Tensor& in, const std::vector<int64_t>& reduce_dims, const Tensor& out0,
                    const Tensor* out1) {
  ReduceProblem problem{in.sizes(), in.strides(), out0.strides(), out1 ? out1->strides() : std::vector<int64_t>{},
                        reduce_dims, static_cast<int64_t>(itemsize(in.dtype())),
                        reinterpret_cast<uintptr_t>(in.data_ptr()) % 16 == 0,
                        device_properties(in.device().index).multiprocessors};
  return plan_reduction(problem);
}

// The operands of one reduction, made launchable (Note [Reduction indexing]): when a
// group of dims is too large or too scattered for 32-bit division, the input is copied
// with the kept dims first and the reduced dims last, contiguous, so each group
// coalesces into one dim; the outputs are permuted alike (views, written in place).
struct Launchable {
  Tensor in, out0, out1;
  ReducePlan plan;
};

Launchable make_launchable(const Tensor& in, const std::vector<int64_t>& reduce_dims, const Tensor& out0,
                           const Tensor* out1, const char* op) {
  KILN_ASSERT(in.device().is_cuda() && out0.device() == in.device() && (!out1 || out1->device() == in.device()), op,
              ": operands on ", in.device(), " and ", out0.device());
  KILN_ASSERT(in.dim() == out0.dim() && (!out1 || out1->dim() == in.dim()), op,
              ": outputs must be in keepdim form, got ", out0.sizes(), " for input ", in.sizes());
  Launchable l{in, out0, out1 ? *out1 : Tensor(), plan_for(in, reduce_dims, out0, out1)};
  if (l.plan.kept_numel == 0 ||
      (group_fits(l.plan.kept, l.plan.kept_numel) && group_fits(l.plan.reduced, l.plan.reduced_numel))) {
    return l;
  }
  std::vector<int64_t> order, reduced_last;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const bool reduced = std::binary_search(reduce_dims.begin(), reduce_dims.end(), d);
    (reduced ? reduced_last : order).push_back(d);
  }
  std::vector<int64_t> new_reduce_dims;
  for (int64_t d : reduced_last) {
    new_reduce_dims.push_back(static_cast<int64_t>(order.size()));
    order.push_back(d);
  }
  l.in = in.permute(order).contiguous();
  l.out0 = out0.permute(order);
  if (out1) l.out1 = out1->permute(order);
  l.plan = plan_for(l.in, new_reduce_dims, l.out0, out1 ? &l.out1 : nullptr);
  KILN_CHECK(group_fits(l.plan.kept, l.plan.kept_numel) && group_fits(l.plan.reduced, l.plan.reduced_numel), op,
             ": the output's layout (sizes ", out0.sizes(), ", strides ", out0.strides(),
             ") is too scattered for a reduction of this size on CUDA; pass a contiguous output");
  return l;
}

template <typename T>
const T* input_data(const Launchable& l) {
  return static_cast<const T*>(l.in.data_ptr());
}

template <typename T>
T* output_data(const Tensor& out, const char* op) {
  KILN_ASSERT(out.dtype() == dtype_of_v<T>, op, ": output dtype ", out.dtype(), ", expected ", dtype_of_v<T>);
  return static_cast<T*>(out.data_ptr());
}

// ==== dispatch: an op struct per ReduceOp and dtype ===========================================

void sum_or_mean(const Launchable& l, bool mean) {
  const char* name = mean ? "mean" : "sum";
  auto run = [&]<typename T>() {
    using Out = std::conditional_t<is_floating_v<T>, T, int64_t>;
    const SumOp<T, Out> op{output_data<Out>(l.out0, name), static_cast<SumAcc<T>>(l.plan.reduced_numel), mean};
    launch_reduction(op, input_data<T>(l), l.plan, l.in.device().index);
  };
  if (mean) {
    visit_dtype<kFloatingTypes>(l.in.dtype(), name, run);
  } else {
    visit_dtype<kAllTypes>(l.in.dtype(), name, run);
  }
}

template <bool kMax>
void extremum(const Launchable& l) {
  const char* name = kMax ? "amax" : "amin";
  visit_dtype<kAllTypes>(l.in.dtype(), name, [&]<typename T>() {
    launch_reduction(ExtremumOp<T, kMax>{output_data<T>(l.out0, name)}, input_data<T>(l), l.plan,
                     l.in.device().index);
  });
}

void vector_norm(const Launchable& l, double p) {
  visit_dtype<kFloatingTypes>(l.in.dtype(), "norm", [&]<typename T>() {
    using Acc = opmath_t<T>;
    T* out = output_data<T>(l.out0, "norm");
    const T* x = input_data<T>(l);
    const int device = l.in.device().index;
    if (std::isinf(p)) {
      launch_reduction(NormOp<T, NormKind::Inf>{out, Acc(0)}, x, l.plan, device);
    } else if (p == 1.0) {
      launch_reduction(NormOp<T, NormKind::One>{out, Acc(1)}, x, l.plan, device);
    } else if (p == 2.0) {
      launch_reduction(NormOp<T, NormKind::Two>{out, Acc(2)}, x, l.plan, device);
    } else {
      launch_reduction(NormOp<T, NormKind::P>{out, static_cast<Acc>(p)}, x, l.plan, device);
    }
  });
}

}  // namespace

// ==== Backend entry points ====================================================================

void CudaBackend::reduce(ReduceOp op, const Tensor& in, const std::vector<int64_t>& reduce_dims, const Tensor& out,
                         const ReduceParams& params) {
  const Launchable l = make_launchable(in, reduce_dims, out, nullptr, op_name(op));
  switch (op) {
    case ReduceOp::Sum: return sum_or_mean(l, /*mean=*/false);
    case ReduceOp::Mean: return sum_or_mean(l, /*mean=*/true);
    case ReduceOp::Max: return extremum<true>(l);
    case ReduceOp::Min: return extremum<false>(l);
    case ReduceOp::NormP: return vector_norm(l, params.p);
    case ReduceOp::NormInf: return vector_norm(l, std::numeric_limits<double>::infinity());
  }
}

void CudaBackend::var_mean(const Tensor& in, const std::vector<int64_t>& reduce_dims, int64_t correction,
                           const Tensor& var_out, const Tensor& mean_out) {
  const Launchable l = make_launchable(in, reduce_dims, var_out, &mean_out, "var_mean");
  visit_dtype<kFloatingTypes>(in.dtype(), "var_mean", [&]<typename T>() {
    const WelfordOp<T> op{output_data<T>(l.out0, "var_mean"), output_data<T>(l.out1, "var_mean"), correction};
    launch_reduction(op, input_data<T>(l), l.plan, l.in.device().index);
  });
}

void CudaBackend::arg_reduce(ArgReduceOp op, const Tensor& in, int64_t dim, const Tensor& values_out,
                             const Tensor& indices_out) {
  const bool is_max = op == ArgReduceOp::ArgMax;
  const char* name = is_max ? "argmax" : "argmin";
  const Launchable l = make_launchable(in, {dim}, values_out, &indices_out, name);
  visit_dtype<kAllTypes>(in.dtype(), name, [&]<typename T>() {
    T* values = output_data<T>(l.out0, name);
    int64_t* indices = output_data<int64_t>(l.out1, name);
    const int device = l.in.device().index;
    if (is_max) {
      launch_reduction(ArgOp<T, true>{values, indices}, input_data<T>(l), l.plan, device);
    } else {
      launch_reduction(ArgOp<T, false>{values, indices}, input_data<T>(l), l.plan, device);
    }
  });
}

}  // namespace kiln::cuda
