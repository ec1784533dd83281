// The CPU backend's float32 convolutions on oneDNN (forward, backward-input,
// backward-weight), beside the vol2col + Eigen reference path of conv.cpp.
//
// Note [oneDNN convolutions]: decided by measurement (bench/results/2026-11-25-cpu-train-
// step.md). On this project's 2-core AVX-512 machine, one 3D ResNet-18 training step's
// convolutions at 28^3, batch 8, take about 1.8 s with oneDNN's JIT AVX-512 kernels in
// their blocked layouts (the reorders from and to our NCDHW tensors included), 2.4 s in
// PyTorch (the same library, through its own per-call reorders and allocations), and
// about 3.4 s on our vol2col + Eigen path built for AVX-512 (the whole step took 4.0 s
// there and 1.9 s with oneDNN, whose convolutions are ~68% of it); forcing oneDNN onto
// plain NCDHW layouts makes it pick its own im2col + GEMM at 3.7 s. oneDNN is what PyTorch's CPU
// convolutions use, Debian packages it (libdnnl-dev), and it threads with the same OpenMP
// runtime as our kernels. So float32 convolutions run there, and conv.cpp stays the
// readable reference that the tests compare this path with (set_onednn_enabled(false),
// core/flags.h), and the path for float64 and for builds without oneDNN.
//
// How a call runs (conv_onednn.cpp):
//   1. A plan per convolution key (pass, shapes, strides, stride, padding, dilation,
//      groups, thread count), made once and cached: the primitive, created with
//      format_tag::any so oneDNN picks its fastest (blocked) layouts, plus a cached
//      reorder for each operand whose chosen layout differs from our plain one; a
//      channels-last call fixes its activations to NDHWC, so only its weights are
//      reordered (Note [oneDNN and channels-last] in conv_onednn.cpp). Creating one
//      costs ~0.1-1 ms; the cache makes it a one-time cost per shape, as cuDNN's
//      algorithm cache does.
//   2. Each call points the oneDNN memories its thread keeps for the plan at our
//      contiguous tensors (no copy; Note [oneDNN calls without allocations] in
//      conv_onednn.cpp), reorders into blocked buffers where the plan says so, runs the
//      primitive, reorders the result back. Blocked buffers and oneDNN's scratchpad are
//      kept with a small plan, and come from our CPU allocator's cache (allocate_workspace)
//      for a large one, so nothing is page-faulted in again on the next step.
// A dnnl::error becomes a kiln::Error naming the pass and the shapes.
#pragma once

#include <cstddef>

#include "core/backend.h"
#include "core/tensor.h"

namespace kiln::cpu::onednn {

// Whether oneDNN runs this convolution: the build has it, it is enabled (core/flags.h),
// the dtype is float32 and no size is zero (the reference path handles empty tensors).
bool handles(const Tensor& a, const Tensor& b, const Tensor& out);

void conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params, const Tensor& out);
void conv_backward_input(const Tensor& grad_out, const Tensor& weight, const ConvParams& params,
                         const Tensor& grad_input);
void conv_backward_weight(const Tensor& grad_out, const Tensor& input, const ConvParams& params,
                          const Tensor& grad_weight);

// "2.6.3" (the version of the oneDNN library loaded), or "not built".
const char* version();

// How many plans the cache holds now (0 without oneDNN): tests see oneDNN really ran;
// and how many of them run oneDNN's channels-last kernels (Note [oneDNN and
// channels-last] in conv_onednn.cpp): tests see channels-last calls take them.
size_t cached_plans();
size_t cached_channels_last_plans();

}  // namespace kiln::cpu::onednn
