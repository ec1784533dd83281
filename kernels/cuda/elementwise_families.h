// How the CUDA elementwise ops are split over files, and the launchers each file compiles.
//
// Every op code is compiled in exactly one .cu file of its family (compile time: the two CI
// cores build the files in parallel, and each instantiates only its own ops and dtypes,
// STYLE 17). The family is derived from the op table (core/op_table.h), never listed:
//   unary.cu            UnaryNumeric     codes defined for integers too (neg, relu, clamp,
//                                        ...) and the Bool predicates (isnan, ...)
//   unary_math.cu       UnaryFloating    the floating-only math (sqrt, exp, gelu, ...)
//   binary.cu           BinaryArithmetic add, sub, mul, div, maximum, minimum, pow
//   compare.cu          BinaryCompare    comparisons and logical ops (Bool result)
//   binary_backward.cu  BinaryBackward   the activations' fused backward functors
// Each file exports one table of launchers indexed by op code, null for the codes of the
// other families (built by family_launchers, elementwise.cuh). CudaBackend::unary and
// ::binary pick the family's table and call the code's launcher: one dispatch per call.
#pragma once

#include <array>

#include "core/op_table.h"
#include "core/tensor.h"

namespace kiln::cuda {

enum class ElementwiseFamily { UnaryNumeric, UnaryFloating, BinaryArithmetic, BinaryCompare, BinaryBackward };

constexpr ElementwiseFamily family_of(UnaryOp op) {
  return floating_only(op) ? ElementwiseFamily::UnaryFloating : ElementwiseFamily::UnaryNumeric;
}

constexpr ElementwiseFamily family_of(BinaryOp op) {
  if (op_info(op).bool_result) return ElementwiseFamily::BinaryCompare;
  if (op_info(op).is_backward) return ElementwiseFamily::BinaryBackward;
  return ElementwiseFamily::BinaryArithmetic;
}

// out = f(in) / f(a, b) for one op code: what Backend::unary / ::binary do after dispatch.
using UnaryLauncher = void (*)(const Tensor& in, const Tensor& out, const ElementwiseParams& params);
using BinaryLauncher = void (*)(const Tensor& a, const Tensor& b, const Tensor& out,
                                const ElementwiseParams& params);
using UnaryLaunchers = std::array<UnaryLauncher, kNumUnaryOps>;
using BinaryLaunchers = std::array<BinaryLauncher, kNumBinaryOps>;

extern const UnaryLaunchers kUnaryNumericLaunchers;      // unary.cu
extern const UnaryLaunchers kUnaryFloatingLaunchers;     // unary_math.cu
extern const BinaryLaunchers kBinaryArithmeticLaunchers; // binary.cu
extern const BinaryLaunchers kBinaryCompareLaunchers;    // compare.cu
extern const BinaryLaunchers kBinaryBackwardLaunchers;   // binary_backward.cu

// copy.cu: dst = cast(src) on one device, any strides and dtypes (the engine).
void copy_on_device(const Tensor& src, const Tensor& dst);

}  // namespace kiln::cuda
