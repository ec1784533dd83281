// What each reduction computes, written once for both backends: the op structs that the
// CPU engine (kernels/cpu/reduce.cpp) and the CUDA engine (kernels/cuda/reduce.cuh) run.
//
// An op struct, passed to an engine by value:
//   using In, Acc;                          input storage type, accumulator state
//   Acc identity();                         the state of an empty reduction
//   Acc reduce(Acc, opmath_t<In>, int64_t index);   folds in one element; `index` is its
//                                           position in the reduced index space (argmax)
//   Acc combine(Acc, Acc);                  merges two partial states, in any order (argmax
//                                           breaks ties by index, so order never matters)
//   void write(Acc, int64_t off0, int64_t off1);    projects and stores one output
// Every member is KILN_HOST_DEVICE. The sums are templated on their accumulator `S`,
// because the backends choose differently (Note [Reduction accumulators] in the CPU's
// reduce.cpp and the CUDA's reduce_sum.cu): the CPU sums floating values in double, the
// GPU in the input's opmath type. Writes round S -> opmath -> storage type (the host's
// exact conversions, core/half.h; once per output, so their cost does not matter).
//
// NaN: max, min and the inf-norm propagate NaN (once NaN, always NaN), as PyTorch.
// argmax/argmin treat NaN as the extremum and return the index of the first one; ties
// otherwise go to the first index too.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype.h"
#include "core/half.h"  // KILN_HOST_DEVICE
#include "kernels/wrapping_math.h"

namespace kiln::reduce_ops {

#define KR KILN_HOST_DEVICE inline

template <typename V>
KR bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;  // no fast-math anywhere (STYLE 17), so this is isnan
  } else {
    return false;
  }
}

// Rounds an accumulator into a storage type (double -> float -> Half for half types).
template <typename Out, typename S>
KR Out round_to(S a) {
  return static_cast<Out>(static_cast<opmath_t<Out>>(a));
}

// sum, and mean when `divisor` is the count (floating inputs only). S: the sum's type.
template <typename T, typename Out, typename S>
struct SumOp {
  using In = T;
  using Acc = S;
  Out* out;
  S divisor = S(1);
  bool is_mean = false;
  KR Acc identity() const { return Acc(0); }
  // Integer sums wrap (Note [Integer overflow wraps]); floating ones are plain additions.
  KR Acc reduce(Acc a, opmath_t<T> v, int64_t) const { return wrapping_add(a, static_cast<Acc>(v)); }
  KR Acc combine(Acc a, Acc b) const { return wrapping_add(a, b); }
  KR void write(Acc a, int64_t o, int64_t) const { out[o] = round_to<Out>(is_mean ? a / divisor : a); }
};

// amax (kMax) and amin. The identity is -inf/+inf (or the integer limits), so that any
// value, -inf included, replaces it.
template <typename T, bool kMax>
struct ExtremumOp {
  using In = T;
  using Acc = opmath_t<T>;
  T* out;
  KR Acc identity() const {
    if constexpr (std::is_floating_point_v<Acc>) {
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  KR Acc reduce(Acc a, Acc v, int64_t) const {
    // Once a is NaN, no comparison with it is true and it stays.
    return (is_nan(v) || (kMax ? v > a : v < a)) ? v : a;
  }
  KR Acc combine(Acc a, Acc b) const { return reduce(a, b, 0); }
  KR void write(Acc a, int64_t o, int64_t) const { out[o] = static_cast<T>(a); }
};

// Vector norms. One = sum |x|, Two = sqrt(sum x^2), P = (sum |x|^p)^(1/p) for p > 0 (the
// op layer checks), Inf = max |x| (NaN-propagating). p = 1 and 2 have their own kinds to
// keep pow() out of their loops. S: the sum's type (and p's).
enum class NormKind { One, Two, P, Inf };

template <typename T, NormKind K, typename S>
struct NormOp {
  using In = T;
  using Acc = S;
  T* out;
  S p = S(2);
  KR Acc identity() const { return Acc(0); }
  KR Acc reduce(Acc a, opmath_t<T> v, int64_t) const {
    const Acc x = static_cast<Acc>(v);
    if constexpr (K == NormKind::One) {
      return a + std::fabs(x);
    } else if constexpr (K == NormKind::Two) {
      return a + x * x;
    } else if constexpr (K == NormKind::P) {
      return a + std::pow(std::fabs(x), p);
    } else {
      return combine(a, std::fabs(x));
    }
  }
  KR Acc combine(Acc a, Acc b) const {
    if constexpr (K == NormKind::Inf) {
      return (is_nan(b) || b > a) ? b : a;  // NaN propagates, as in ExtremumOp
    } else {
      return a + b;
    }
  }
  KR void write(Acc a, int64_t o, int64_t) const {
    if constexpr (K == NormKind::Two) a = std::sqrt(a);
    if constexpr (K == NormKind::P) a = std::pow(a, Acc(1) / p);
    out[o] = round_to<T>(a);
  }
};

// Welford's running mean and M2 (sum of squared deviations from the mean): one pass, and
// no cancellation as in E[x^2] - E[x]^2. Partial states merge by Chan et al.'s formula; an
// empty state (count 0: a lane or a slice that saw no element) merges as the identity.
template <typename S>
struct WelfordState {
  S mean = 0;
  S m2 = 0;
  int64_t count = 0;
};

template <typename T, typename S>
struct WelfordOp {
  using In = T;
  using Acc = WelfordState<S>;
  T* var_out;
  T* mean_out;
  int64_t correction = 1;
  KR Acc identity() const { return {}; }
  KR Acc reduce(Acc s, opmath_t<T> v, int64_t) const {
    const S x = static_cast<S>(v);
    s.count += 1;
    const S delta = x - s.mean;
    s.mean += delta / static_cast<S>(s.count);
    s.m2 += delta * (x - s.mean);
    return s;
  }
  KR Acc combine(Acc a, Acc b) const {
    if (a.count == 0) return b;
    if (b.count == 0) return a;
    const S na = static_cast<S>(a.count), nb = static_cast<S>(b.count);
    const S n = na + nb;
    const S delta = b.mean - a.mean;
    return {a.mean + delta * (nb / n), a.m2 + b.m2 + delta * delta * (na * nb / n), a.count + b.count};
  }
  KR void write(const Acc& s, int64_t var_offset, int64_t mean_offset) const {
    // As PyTorch: divisor max(0, N - correction); 0 gives inf (or NaN when M2 is 0 too).
    const S divisor = static_cast<S>(s.count - correction > 0 ? s.count - correction : 0);
    var_out[var_offset] = round_to<T>(s.m2 / divisor);
    mean_out[mean_offset] = round_to<T>(s.count > 0 ? s.mean : std::numeric_limits<S>::quiet_NaN());
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
  KR static bool better(V v, V best) {
    if (is_nan(best)) return false;
    return is_nan(v) || (kMax ? v > best : v < best);
  }
  KR Acc identity() const { return {}; }
  KR Acc reduce(Acc a, V v, int64_t index) const { return (a.index < 0 || better(v, a.value)) ? Acc{v, index} : a; }
  // Partial states of a tree combine cover interleaved index ranges (a GPU lane takes
  // every 32nd element), so neither side is "earlier": equal values (or two NaNs) go to
  // the smaller index.
  KR Acc combine(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (better(b.value, a.value)) return b;
    if (better(a.value, b.value)) return a;
    return a.index <= b.index ? a : b;
  }
  KR void write(const Acc& a, int64_t value_offset, int64_t index_offset) const {
    values[value_offset] = static_cast<T>(a.value);
    indices[index_offset] = a.index;
  }
};

#undef KR

}  // namespace kiln::reduce_ops
