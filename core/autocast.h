// Autocast: mixed precision regions, as torch.autocast.
//
// Inside an `AutocastGuard guard(DType::Float16)` (or BFloat16) region, on this thread:
//  - lower-precision ops (convolution, conv1d/2d/3d, conv_transpose*, linear, matmul, bmm,
//    einsum) cast their floating inputs to the autocast dtype and run in it;
//  - float32 ops (softmax, log_softmax, every loss, layer/batch-norm-style
//    normalisations that are not already mixed-precision aware, sum/mean/var/std/norm/
//    logsumexp reductions, exp, log, pow) cast float16/bfloat16 inputs up to float32
//    (batch_norm is already mixed-precision aware and casts nothing, core/ops/batch_norm.h);
//  - every other op (add, mul, cat, where, ...) runs in the widest input dtype, as type
//    promotion already gives.
// float64 tensors are never touched (autocast only moves float32 <-> the autocast dtype).
// The casts are ordinary differentiable `to()` ops, so backward runs each op in the dtype
// its forward used and gradients reach float32 leaves as float32.
//
// Note [Autocast cast cache]: a parameter (a leaf that requires grad) used by several ops
// in one region is cast once: the cast is cached by the parameter's identity and version
// until the outermost region on this thread exits. Other tensors are cast at each use.
//
// Regions nest; an inner guard may change the dtype or disable autocast
// (`AutocastGuard off(DType::Float16, /*enabled=*/false)`), and the previous state comes
// back when it exits. Autocast is off inside the backward pass' own kernels.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln {

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::Float16;  // Float16 or BFloat16
};

// This thread's autocast state.
AutocastState autocast_state();
bool autocast_enabled();

// RAII region. dtype must be Float16 or BFloat16 (a kiln::Error otherwise).
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = DType::Float16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastState previous_;
};

// Which list an op belongs to (Note above); the op layer calls autocast_inputs at the top
// of each listed op.
enum class AutocastPolicy { LowerPrecision, Float32 };

// The inputs as the op must see them under the current state: unchanged when autocast is
// off or for non-floating / float64 / undefined tensors; otherwise cast per `policy`
// (lower precision through the cast cache for parameters).
Tensor autocast_input(const Tensor& t, AutocastPolicy policy);

// Number of entries in this thread's cast cache (for tests), and an explicit clear (the
// outermost guard's exit clears it).
size_t autocast_cache_size();
void clear_autocast_cache();

}  // namespace kiln
