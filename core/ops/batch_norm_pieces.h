// The pieces batch_norm (batch_norm.h) is assembled from, exposed so that SyncBatchNorm
// (dist/) can reuse them with all-reduces in between (Note [Batch norm pieces] in
// core/backend.h): validate, compute local statistics, all-reduce (mean, var, count),
// update the running statistics, normalise with an autograd node whose backward
// all-reduces (sum_dy, sum_dy_xmu) between its two kernels.
//
// batch_norm_normalize has its own gradient check (eval-mode statistics, which are
// constants to it); invstd_of is arithmetic inside the op, listed as not differentiable in
// tests/core/test_gradcheck_coverage.cpp.
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"

namespace kiln::batch_norm_pieces {

// The input as the kernels take it: contiguous, or channels-last when it is laid out so
// (its suggested memory format, PyTorch's rule: batch norm keeps a channels-last
// activation channels-last), and whether a tensor already is.
Tensor kernel_layout(const Tensor& input);
bool is_kernel_layout(const Tensor& input);

// The dtype of the per-channel statistics: Float64 for Float64 input, else Float32.
DType stats_dtype(DType input);

// Checks input, running statistics, weight and bias as batch_norm documents (rank >= 2,
// floating, [C] per-channel tensors, one device; training needs more than one value per
// channel). `op` names the caller in the messages.
void check_arguments(const char* op, const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool training);

// Values per channel: N times the spatial volume.
int64_t count_per_channel(const Tensor& input);

struct Stats {
  Tensor mean;  // [C], stats_dtype
  Tensor var;   // [C], biased
};
// The batch's per-channel mean and biased variance of an input in kernel_layout (backend kernel).
Stats local_stats(const Tensor& input);

// 1 / sqrt(var + eps), [C].
Tensor invstd_of(const Tensor& var, double eps);

// running = (1 - momentum) running + momentum batch, with the unbiased variance
// var * count / (count - 1); in place under NoGradGuard; undefined running tensors are skipped.
void update_running_stats(const Tensor& running_mean, const Tensor& running_var, const Stats& batch, int64_t count,
                          double momentum);

// Called by the backward between its reduce and input kernels with the local per-channel
// sums (sum_dy, sum_dy_xmu), which it may replace in place by their sum over ranks.
using GradSumsHook = std::function<void(const Tensor& sum_dy, const Tensor& sum_dy_xmu)>;

struct Normalization {
  Tensor mean{};       // [C], stats_dtype
  Tensor invstd{};     // [C], stats_dtype
  int64_t count = 1;   // values per channel that mean/invstd came from (over every rank)
  bool training = true;  // the statistics came from this batch: the gradient flows through them
  GradSumsHook grad_sums_hook{};  // may be empty
  bool relu = false;              // a ReLU follows, fused (Note [Batch norm with ReLU] in core/backend.h)
  // Added before the ReLU (relu on), laid out as the input: residual_operand's result
  // (Note [Batch norm, add and ReLU] in core/backend.h). Undefined: none.
  Tensor residual{};
};

// The residual of a fused add, checked against the kernel-layout input x (the same shape,
// dtype and device; `op` names the caller) and laid out as x.
Tensor residual_operand(const char* op, const Tensor& residual, const Tensor& x);

// out = (x - mean) invstd weight + bias (max(out, 0) with relu, max(out + residual, 0) with
// a residual), recording a backward node when anything requires grad. The node saves
// input, mean, invstd, weight (and bias with relu alone; the output with a residual).
// Gradient, dy being grad_out (masked by out > 0 with relu), training:
//   dx = (dy - sum_dy/count - (x - mean) invstd^2 sum_dy_xmu/count) invstd weight
// eval: dx = dy invstd weight; in both, dweight = sum_dy_xmu invstd, dbias = sum_dy, and
// the residual's gradient is dy.
Tensor batch_norm_normalize(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                            const Normalization& norm);

}  // namespace kiln::batch_norm_pieces
