// The channels-last batch-norm kernels of CpuBackend (batch_norm_channels_last.cpp):
// CpuBackend::batch_norm_* call these for operands laid out NDHWC / NHWC, with the
// arguments already checked by the launcher in batch_norm.cpp, which passes the kernel's
// tail (kernels/batch_norm_operands.h) along.
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "kernels/batch_norm_math.h"

namespace kiln::cpu::batch_norm_channels_last {

void stats(const Tensor& input, const Tensor& mean, const Tensor& var);
void apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out,
           batch_norm_math::Tail tail);
void backward_reduce(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                     const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& grad_y,
                     batch_norm_math::Tail tail);
void backward_input(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                    const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in,
                    bool relu);

}  // namespace kiln::cpu::batch_norm_channels_last
