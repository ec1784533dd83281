// CudaBackend::conv_forward / conv_backward_input / conv_backward_weight through cuDNN's
// legacy convolution API (cudnnConvolutionForward, ...BackwardData, ...BackwardFilter).
//
// Semantics: Note [Convolution layout] in core/backend.h; every pass overwrites its output
// (alpha = 1, beta = 0 in the compute type, so the output's old contents, NaN included,
// are never read). Each call:
//   1. returns at once for an empty output, and fills zeros when the product is an empty
//      sum (no input channels, or a batch of 0 for the weight gradient);
//   2. makes its operands contiguous (the op layer already passes them so; a strided
//      output receives the result through a contiguous temporary and a copy);
//   3. takes the descriptors this thread made for the key (Note [Conv descriptors per
//      key]; a 1-d conv runs as 2-d, Note [1-d convolution in cuDNN]);
//   4. picks the algorithm and its workspace (Note [Choosing a conv algorithm]);
//   5. runs it on the calling thread's current stream with the chosen math type.
// Accumulation is in float32 for float16/bfloat16/float32 and float64 for float64; float32
// uses TF32 tensor cores only when allow_tf32_conv() (Note [TF32] in core/flags.h).
#include <functional>

#include "core/autograd/grad_mode.h"
#include "core/kernel_memory.h"
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

Tensor contiguous_operand(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// Runs `pass` (which writes x, w or y as ConvOperands says) with the chosen algorithm.
void run_pass(ConvPass pass, const ConvOperands& o, const ConvParams& params) {
  const int device = o.x.device().index;
  const OnDevice on(device);
  const ConvKey key = conv_key(pass, o.x, o.w, params);
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

// Calls `compute` with `out` itself when it is contiguous, else with a contiguous
// temporary whose result is then copied into `out`.
void into_output(CudaBackend& backend, const Tensor& out, const std::function<void(const Tensor&)>& compute) {
  if (out.is_contiguous()) {
    compute(out);
    return;
  }
  const Tensor temp = allocate_tensor(out.sizes(), out.dtype(), out.device());
  compute(temp);
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
  const Tensor x = contiguous_operand(input), w = contiguous_operand(weight);
  into_output(*this, out, [&](const Tensor& y) { run_pass(ConvPass::Forward, {x, w, y}, params); });
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
  const Tensor dy = contiguous_operand(grad_out), w = contiguous_operand(weight);
  into_output(*this, grad_input, [&](const Tensor& dx) { run_pass(ConvPass::BackwardData, {dx, w, dy}, params); });
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
  const Tensor dy = contiguous_operand(grad_out), x = contiguous_operand(input);
  into_output(*this, grad_weight, [&](const Tensor& dw) { run_pass(ConvPass::BackwardFilter, {x, dw, dy}, params); });
}

}  // namespace kiln::cuda
