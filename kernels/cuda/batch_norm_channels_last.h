// The channels-last batch-norm kernels of CudaBackend (batch_norm_channels_last.cu):
// CudaBackend::batch_norm_* (batch_norm.cu) call these for NDHWC / NHWC operands, with the
// arguments already checked and the kernel's tail chosen (kernels/batch_norm_operands.h),
// on `device`'s `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend.h"
#include "kernels/batch_norm_math.h"

namespace kiln::cuda::batch_norm_channels_last {

void stats(const Tensor& input, const Tensor& mean, const Tensor& var, int device, cudaStream_t stream);
void apply(const Tensor& input, const BatchNormCoefficients& norm, const Tensor& out,
           batch_norm_math::Tail tail, int device, cudaStream_t stream);
void backward_reduce(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                     const Tensor& sum_dy, const Tensor& sum_dy_xmu, const Tensor& grad_y,
                     batch_norm_math::Tail tail, int device, cudaStream_t stream);
void backward_input(const Tensor& grad_out, const Tensor& input, const BatchNormCoefficients& norm,
                    const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count, const Tensor& grad_in,
                    bool relu, int device, cudaStream_t stream);

}  // namespace kiln::cuda::batch_norm_channels_last
