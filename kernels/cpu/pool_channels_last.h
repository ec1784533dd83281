// The channels-last pooling kernels of CpuBackend (pool_channels_last.cpp):
// CpuBackend's pooling launchers (pool.cpp) call these for NDHWC / NHWC operands, with
// the arguments checked and the geometry computed.
#pragma once

#include "core/pool_geometry.h"
#include "core/tensor.h"

namespace kiln::cpu::pool_channels_last {

void max_forward(const Tensor& input, const PoolGeometry& g, const Tensor& out, const Tensor& indices);
void max_backward(const Tensor& grad_out, const Tensor& indices, const PoolGeometry& g,
                  const Tensor& grad_in);
void avg_forward(const Tensor& input, const Tensor& out, const PoolGeometry& g, bool adaptive);
void avg_backward(const Tensor& grad_out, const Tensor& grad_in, const PoolGeometry& g, bool adaptive);

}  // namespace kiln::cpu::pool_channels_last
