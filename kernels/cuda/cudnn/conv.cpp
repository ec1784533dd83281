// CudaBackend::conv_forward / conv_backward_input / conv_backward_weight through cuDNN's
// legacy convolution API (cudnnConvolutionForward, ...BackwardData, ...BackwardFilter).
//
// Semantics: Note [Convolution layout] in core/backend.h; every pass overwrites its output
// (alpha = 1, beta = 0 in the compute type, so the output's old contents, NaN included,
// are never read). Each call:
//   1. returns at once for an empty output, and fills zeros when the product is an empty
//      sum (no input channels, or a batch of 0 for the weight gradient);
//   2. puts its operands in one layout, row-major or channels-last (Note [cuDNN layouts];
//      the op layer already passes them so);
//   3. takes the descriptors this thread made for the key (Note [Conv descriptors per
//      key]; a 1-d conv runs as 2-d, Note [1-d convolution in cuDNN]);
//   4. picks the algorithm and its workspace (Note [Choosing a conv algorithm]);
//   5. runs it on the calling thread's current stream with the chosen math type.
// Accumulation is in float32 for float16/bfloat16/float32 and float64 for float64; float32
// uses TF32 tensor cores only when allow_tf32_conv() (Note [TF32] in core/flags.h).
#include <functional>

#include "core/autograd/grad_mode.h"
#include "core/kernel_memory.h"
#include "core/memory_format.h"
#include "core/ops/factory.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cudnn/conv_algorithms.h"
#include "kernels/cuda/cudnn/cudnn_check.h"
#include "kernels/cuda/cudnn/cudnn_descriptors.h"
#include "kernels/cuda/cudnn/cudnn_handle.h"
#include "kernels/cuda/launch.h"

namespace kiln::cuda {
namespace {

// 1 and 0 in the type cuDNN scales by: double for float64 data, float otherwise.
struct Scaling {
  explicit Scaling(DType dtype) : f64(dtype == DType::Float64) {}
  const void* one() const { return f64 ? static_cast<const void*>(&one_d) : &one_f; }
  const void* zero() const { return f64 ? static_cast<const void*>(&zero_d) : &zero_f; }
  bool f64;
  float one_f = 1.0f, zero_f = 0.0f;
  double one_d = 1.0, zero_d = 0.0;
};

// Note [cuDNN layouts]: a pass runs with its three operands in one layout, as cuDNN wants
// them (a filter's format must match): channels-last when any of them is laid out
// channels-last only (the op layer passes all three in the convolution's memory format,
// core/ops/conv_arguments.cpp), else row-major. cuDNN's tensor descriptors take the
// strides as they are and the filter descriptor the matching format (NHWC: K<spatial>C),
// so a channels-last convolution runs without a conversion. An operand in the other
// layout is converted (a counted layout conversion, Note [Layout conversions]) and an
// output that is not in the pass's layout receives the result through a temporary.
MemoryFormat pass_format(const Tensor& a, const Tensor& b, const Tensor& out) {
  for (const Tensor* t : {&a, &b, &out}) {
    if (is_channels_last_only(t->sizes(), t->strides())) return channels_last_format(t->dim());
  }
  return MemoryFormat::Contiguous;
}

// `t` dense in `format`; one that is both layouts at once (one channel, 1x1x1 space) is
// given the format's exact strides as a view (the same bytes), so cuDNN sees one layout.
Tensor operand_in(const Tensor& t, MemoryFormat format) {
  if (!t.is_contiguous(format)) return t.contiguous(format);
  if (format == MemoryFormat::Contiguous) return t;
  const Dims strides = memory_format_strides(t.sizes(), format, "conv");
  return t.strides() == strides ? t : t.as_strided(t.sizes(), strides, t.storage_offset());
}

// Runs `pass` (which writes x, w or y as ConvOperands says) with the chosen algorithm.
void run_pass(ConvPass pass, const ConvOperands& o, const ConvParams& params) {
  const int device = o.x.device().index;
  const OnDevice on(device);
  const ConvKey key = conv_key(pass, o, params);
  ConvDescriptors& d = conv_descriptors(key, o.x, o.w, o.y, params);
  const cudnnHandle_t handle = cudnn_handle(on.stream);
  CachingWorkspaceMemory memory(on.stream);  // declared before `choice`, whose workspace it frees
  const ConvAlgorithmCache::Choice choice = choose_conv_algorithm(key, handle, d, o, memory);
  d.conv.set_math_if_changed(choice.algorithm.math);
  const Scaling scale(o.x.dtype());
  void* workspace = choice.workspace.data();
  const size_t workspace_bytes = choice.workspace.bytes();
  switch (pass) {
    case ConvPass::Forward:
      KILN_CUDNN_CHECK(cudnnConvolutionForward(
          handle, scale.one(), d.x.get(), o.x.data_ptr(), d.w.get(), o.w.data_ptr(), d.conv.get(),
          static_cast<cudnnConvolutionFwdAlgo_t>(choice.algorithm.algo), workspace, workspace_bytes, scale.zero(),
          d.y.get(), o.y.data_ptr()));
      break;
    case ConvPass::BackwardData:
      KILN_CUDNN_CHECK(cudnnConvolutionBackwardData(
          handle, scale.one(), d.w.get(), o.w.data_ptr(), d.y.get(), o.y.data_ptr(), d.conv.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algorithm.algo), workspace, workspace_bytes,
          scale.zero(), d.x.get(), o.x.data_ptr()));
      break;
    case ConvPass::BackwardFilter:
      KILN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          handle, scale.one(), d.x.get(), o.x.data_ptr(), d.y.get(), o.y.data_ptr(), d.conv.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algorithm.algo), workspace, workspace_bytes,
          scale.zero(), d.w.get(), o.w.data_ptr()));
      break;
  }
  // The workspace goes back to the caching allocator when `choice` ends: its block is
  // reused only by later work on this stream, which runs after this convolution.
}

// Calls `compute` with `out` itself when it is dense in `format`, else with a temporary
// in `format` whose result is then copied into `out`.
void into_output(CudaBackend& backend, const Tensor& out, MemoryFormat format,
                 const std::function<void(const Tensor&)>& compute) {
  if (out.is_contiguous(format)) {
    compute(out);
    return;
  }
  const Tensor temp = empty(out.sizes(), {.dtype = out.dtype(), .device = out.device()}, format);
  compute(temp);
  count_layout_conversion(out.sizes(), temp.strides(), out.strides());
  backend.copy(temp, out, /*non_blocking=*/false);
}

void check_operands(const char* op, const Tensor& a, const Tensor& b, const Tensor& out) {
  KILN_ASSERT(a.dtype() == out.dtype() && b.dtype() == out.dtype(), op, ": operands of dtypes ", a.dtype(), ", ",
              b.dtype(), " and ", out.dtype());
  KILN_ASSERT(a.device() == out.device() && b.device() == out.device(), op, ": operands on ", a.device(), ", ",
              b.device(), " and ", out.device());
}

}  // namespace

void CudaBackend::conv_forward(const Tensor& input, const Tensor& weight, const ConvParams& params,
                               const Tensor& out) {
  check_operands("conv_forward", input, weight, out);
  if (out.numel() == 0) return;
  if (input.numel() == 0 || weight.numel() == 0) {  // no input channels: an empty sum
    fill(out, 0);
    return;
  }
  const NoGradGuard no_grad;  // temporaries below are plumbing, not part of any graph
  const MemoryFormat format = pass_format(input, weight, out);
  const Tensor x = operand_in(input, format), w = operand_in(weight, format);
  into_output(*this, out, format, [&](const Tensor& y) {
    run_pass(ConvPass::Forward, {x, w, y, format != MemoryFormat::Contiguous}, params);
  });
}

void CudaBackend::conv_backward_input(const Tensor& grad_out, const Tensor& weight, const ConvParams& params,
                                      const Tensor& grad_input) {
  check_operands("conv_backward_input", grad_out, weight, grad_input);
  if (grad_input.numel() == 0) return;
  if (grad_out.numel() == 0 || weight.numel() == 0) {
    fill(grad_input, 0);
    return;
  }
  const NoGradGuard no_grad;
  const MemoryFormat format = pass_format(grad_out, weight, grad_input);
  const Tensor dy = operand_in(grad_out, format), w = operand_in(weight, format);
  into_output(*this, grad_input, format, [&](const Tensor& dx) {
    run_pass(ConvPass::BackwardData, {dx, w, dy, format != MemoryFormat::Contiguous}, params);
  });
}

void CudaBackend::conv_backward_weight(const Tensor& grad_out, const Tensor& input, const ConvParams& params,
                                       const Tensor& grad_weight) {
  check_operands("conv_backward_weight", grad_out, input, grad_weight);
  if (grad_weight.numel() == 0) return;
  if (grad_out.numel() == 0 || input.numel() == 0) {  // a batch of 0: an empty sum
    fill(grad_weight, 0);
    return;
  }
  const NoGradGuard no_grad;
  const MemoryFormat format = pass_format(grad_out, input, grad_weight);
  const Tensor dy = operand_in(grad_out, format), x = operand_in(input, format);
  into_output(*this, grad_weight, format, [&](const Tensor& dw) {
    run_pass(ConvPass::BackwardFilter, {x, dw, dy, format != MemoryFormat::Contiguous}, params);
  });
}

}  // namespace kiln::cuda
