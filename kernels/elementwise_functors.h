// The math of every elementwise op, one functor each, shared by the CPU and CUDA engines.
//
// Functors take and return the op's opmath type M (float for Half/BFloat16, Note [Opmath]
// in core/dtype.h). NaN propagates through relu, clamp, maximum and minimum, as in
// PyTorch. Backward functors take (grad_out, saved) where `saved` is the forward input or
// output as Backend::BinaryOp documents. Integer arithmetic wraps (Note [Integer overflow
// wraps] in kernels/wrapping_math.h).
#pragma once

#include <cmath>
#include <type_traits>

#include "core/half.h"  // KILN_HOST_DEVICE
#include "kernels/vectorisable_exp.h"
#include "kernels/wrapping_math.h"

namespace kiln::functors {

#define KF KILN_HOST_DEVICE inline

template <typename M> KF bool is_nan(M x) {
  if constexpr (std::is_floating_point_v<M>) return x != x;
  else return false;
}

// exp in every functor: on the host, float32 (and so Half/BFloat16, whose opmath is
// float) takes vectorisable_exp (Note [Vectorisable exp]: within 2 ulp, branch-free), so
// the CPU engine's loops over exp, sigmoid, silu, softplus... vectorise instead of calling
// libm per element; double, and the device (whose expf is a few instructions), keep std::exp.
template <typename M> KF M exp_of(M x) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same_v<M, float>) {
    return vectorisable_exp(x);
  } else {
    return std::exp(x);
  }
#else
  return std::exp(x);
#endif
}

// ---- unary ----------------------------------------------------------------------------------
template <typename M> struct Neg { KF M operator()(M x) const { return wrapping_neg(x); } };
template <typename M> struct Abs {
  KF M operator()(M x) const {
    if constexpr (std::is_unsigned_v<M>) return x;
    else return x < M(0) ? wrapping_neg(x) : x;
  }
};
template <typename M> struct Sign {
  KF M operator()(M x) const {
    // Unsigned types skip the `x < 0` test (always false; nvcc warns about it).
    if constexpr (std::is_unsigned_v<M>) return static_cast<M>(x != M(0));
    else return static_cast<M>((M(0) < x) - (x < M(0)));
  }
};
template <typename M> struct Square { KF M operator()(M x) const { return wrapping_mul(x, x); } };
template <typename M> struct Sqrt { KF M operator()(M x) const { return std::sqrt(x); } };
template <typename M> struct Rsqrt { KF M operator()(M x) const { return M(1) / std::sqrt(x); } };
template <typename M> struct Exp { KF M operator()(M x) const { return exp_of(x); } };
template <typename M> struct Log { KF M operator()(M x) const { return std::log(x); } };
template <typename M> struct Reciprocal { KF M operator()(M x) const { return M(1) / x; } };
template <typename M> struct Sigmoid { KF M operator()(M x) const { return M(1) / (M(1) + exp_of(-x)); } };
template <typename M> struct Tanh { KF M operator()(M x) const { return std::tanh(x); } };
template <typename M> struct Relu {
  KF M operator()(M x) const {
    if constexpr (std::is_unsigned_v<M>) return x;
    else return x < M(0) ? M(0) : x;
  }
};
template <typename M> struct Silu { KF M operator()(M x) const { return x / (M(1) + exp_of(-x)); } };
template <typename M> struct Gelu {
  KF M operator()(M x) const { return M(0.5) * x * (M(1) + std::erf(x * M(0.70710678118654752440))); }
};
template <typename M> struct GeluTanh {
  KF M operator()(M x) const {
    const M inner = M(0.79788456080286535588) * (x + M(0.044715) * x * x * x);
    return M(0.5) * x * (M(1) + std::tanh(inner));
  }
};
template <typename M> struct Elu {
  M alpha;
  KF M operator()(M x) const { return x > M(0) ? x : alpha * (exp_of(x) - M(1)); }
};
template <typename M> struct LeakyRelu {
  M slope;
  KF M operator()(M x) const { return x > M(0) ? x : x * slope; }
};
template <typename M> struct Softplus {
  M beta, threshold;
  KF M operator()(M x) const {
    return x * beta > threshold ? x : std::log1p(exp_of(x * beta)) / beta;
  }
};
template <typename M> struct Clamp {
  M lower, upper;
  KF M operator()(M x) const {
    if (is_nan(x)) return x;
    return x < lower ? lower : (x > upper ? upper : x);
  }
};

// Integer power by squaring; negative exponents follow integer division (|base| > 1 -> 0).
template <typename M> KF M int_pow(M base, M exponent) {
  if constexpr (std::is_signed_v<M>) {
    if (exponent < 0) return base == M(1) ? M(1) : base == M(-1) ? (exponent % 2 ? M(-1) : M(1)) : M(0);
  }
  M result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = wrapping_mul(result, base);
    base = wrapping_mul(base, base);
    exponent = static_cast<M>(exponent >> 1);
  }
  return result;
}

template <typename M> struct Pow {
  KF M operator()(M a, M b) const {
    if constexpr (std::is_floating_point_v<M>) return std::pow(a, b);
    else return int_pow(a, b);
  }
};
template <typename M> struct PowScalar {
  M exponent;
  KF M operator()(M x) const {
    if constexpr (std::is_floating_point_v<M>) {
      if (exponent == M(2)) return x * x;
      if (exponent == M(0.5)) return std::sqrt(x);
      return std::pow(x, exponent);
    } else {
      return int_pow(x, exponent);
    }
  }
};

template <typename M> struct LogicalNot { KF bool operator()(M x) const { return !static_cast<bool>(x); } };
template <typename M> struct IsNan { KF bool operator()(M x) const { return is_nan(x); } };
template <typename M> struct IsInf {
  KF bool operator()(M x) const {
    if constexpr (std::is_floating_point_v<M>) return std::isinf(x);
    else return false;
  }
};
template <typename M> struct IsFinite {
  KF bool operator()(M x) const {
    if constexpr (std::is_floating_point_v<M>) return std::isfinite(x);
    else return true;
  }
};

// ---- binary ---------------------------------------------------------------------------------
template <typename M> struct Add {
  M alpha;
  KF M operator()(M a, M b) const { return wrapping_add(a, wrapping_mul(alpha, b)); }
};
template <typename M> struct Sub { KF M operator()(M a, M b) const { return wrapping_sub(a, b); } };
template <typename M> struct Mul { KF M operator()(M a, M b) const { return wrapping_mul(a, b); } };
template <typename M> struct Div { KF M operator()(M a, M b) const { return a / b; } };
template <typename M> struct Maximum {
  KF M operator()(M a, M b) const { return is_nan(a) ? a : is_nan(b) ? b : (a > b ? a : b); }
};
template <typename M> struct Minimum {
  KF M operator()(M a, M b) const { return is_nan(a) ? a : is_nan(b) ? b : (a < b ? a : b); }
};
template <typename M> struct Eq { KF bool operator()(M a, M b) const { return a == b; } };
template <typename M> struct Ne { KF bool operator()(M a, M b) const { return a != b; } };
template <typename M> struct Lt { KF bool operator()(M a, M b) const { return a < b; } };
template <typename M> struct Le { KF bool operator()(M a, M b) const { return a <= b; } };
template <typename M> struct Gt { KF bool operator()(M a, M b) const { return a > b; } };
template <typename M> struct Ge { KF bool operator()(M a, M b) const { return a >= b; } };
template <typename M> struct LogicalAnd {
  KF bool operator()(M a, M b) const { return static_cast<bool>(a) && static_cast<bool>(b); }
};
template <typename M> struct LogicalOr {
  KF bool operator()(M a, M b) const { return static_cast<bool>(a) || static_cast<bool>(b); }
};

// ---- backward: f(grad_out, saved) ----------------------------------------------------------
template <typename M> struct ReluBackward { KF M operator()(M g, M y) const { return y > M(0) ? g : M(0); } };
template <typename M> struct SigmoidBackward { KF M operator()(M g, M y) const { return g * y * (M(1) - y); } };
template <typename M> struct TanhBackward { KF M operator()(M g, M y) const { return g * (M(1) - y * y); } };
template <typename M> struct SiluBackward {
  KF M operator()(M g, M x) const {
    const M s = M(1) / (M(1) + exp_of(-x));
    return g * s * (M(1) + x * (M(1) - s));
  }
};
template <typename M> struct GeluBackward {
  KF M operator()(M g, M x) const {
    const M cdf = M(0.5) * (M(1) + std::erf(x * M(0.70710678118654752440)));
    const M pdf = exp_of(M(-0.5) * x * x) * M(0.39894228040143267794);
    return g * (cdf + x * pdf);
  }
};
template <typename M> struct GeluTanhBackward {
  KF M operator()(M g, M x) const {
    constexpr M kBeta = M(0.79788456080286535588), kKappa = M(0.044715);
    const M t = std::tanh(kBeta * (x + kKappa * x * x * x));
    const M d_inner = kBeta * (M(1) + M(3) * kKappa * x * x);
    return g * (M(0.5) * (M(1) + t) + M(0.5) * x * (M(1) - t * t) * d_inner);
  }
};
template <typename M> struct EluBackward {
  M alpha;
  KF M operator()(M g, M x) const { return x > M(0) ? g : g * alpha * exp_of(x); }
};
template <typename M> struct LeakyReluBackward {
  M slope;
  KF M operator()(M g, M x) const { return x > M(0) ? g : g * slope; }
};
template <typename M> struct SoftplusBackward {
  M beta, threshold;
  KF M operator()(M g, M x) const {
    if (x * beta > threshold) return g;
    const M z = exp_of(x * beta);
    return g * z / (z + M(1));
  }
};
template <typename M> struct ClampBackward {
  M lower, upper;
  KF M operator()(M g, M x) const { return (x >= lower && x <= upper) ? g : M(0); }
};

// ---- ternary --------------------------------------------------------------------------------
template <typename M> struct Where {
  KF M operator()(bool c, M a, M b) const { return c ? a : b; }
};

#undef KF

}  // namespace kiln::functors
