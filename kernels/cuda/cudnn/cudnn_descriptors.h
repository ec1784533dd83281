// RAII cuDNN descriptors for a convolution, and the geometry cuDNN is given.
//
// A descriptor is a small host-side struct (cudnnCreate*/cudnnDestroy*), so each wrapper
// creates one in its constructor and destroys it in its destructor (STYLE 8).
//
// Note [Conv descriptors per key]: a convolution's four descriptors depend only on its
// ConvKey (sizes, strides, dtype, parameters; the operands are contiguous), so each thread
// keeps the ones it made, per key (conv_descriptors below): a step of a 3D CNN runs the same
// few dozen shapes again and again, and rebuilding them was 4 creates, 4 destroys, a dozen
// small vectors and the cudnnSet* calls per pass, host time an eager step paid per conv.
// Per thread, because the convolution descriptor's math type is set to the chosen
// algorithm's before each run (set_math_if_changed: only when it differs), so a shared
// copy would need a lock. At most kMaxCachedConvDescriptors keys are kept per thread; past
// that the thread's cache is emptied and refilled (a program that cycles through more
// shapes than that pays what it paid before, never unbounded memory).
//
// Note [1-d convolution in cuDNN]: cuDNN's Nd API needs at least 2 spatial dims, so a 1-d
// conv is run as a 2-d one with a unit dim in front of the length: [N, C, L] becomes
// [N, C, 1, L] (the same bytes), the kernel [C_out, C_in/g, 1, k], and the unit dim gets
// stride 1, padding 0 and dilation 1.
#pragma once

#include <cudnn.h>

#include <optional>
#include <vector>

#include "core/backend.h"
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"

namespace kiln::cuda {

class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  // `t`'s dtype, sizes and strides, with the unit dim of Note [1-d convolution in cuDNN].
  void set(const Tensor& t);
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  // A dense weight [C_out, C_in / groups, k...]: packed KC<spatial> (cuDNN's NCHW filter
  // format) or, with channels_last, K<spatial>C (its NHWC format).
  void set(const Tensor& weight, bool channels_last);
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  // Cross-correlation (what deep learning calls convolution) with `params`, accumulating
  // in float32 for float16/bfloat16/float32 and in float64 for float64.
  void set(const ConvParams& params, DType dtype);
  // Sets the math type when it is not the one set last (a cudnnSet call saved per run).
  void set_math_if_changed(ConvMath math);
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
  std::optional<ConvMath> math_;  // the math type set last; none before the first
};

// The descriptors of one convolution: x is the input (or its gradient), w the weight (or
// its gradient), y the output (or its gradient), all three dense in one layout
// (row-major, or channels-last with channels_last).
struct ConvDescriptors {
  ConvDescriptors(const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& params,
                  bool channels_last);
  TensorDescriptor x;
  FilterDescriptor w;
  TensorDescriptor y;
  ConvolutionDescriptor conv;
};

// The calling thread's descriptors for the pass `key` describes (Note [Conv descriptors per
// key]), made from x, w, y and params on the first call with that key. The reference stays
// valid until the thread's next call of conv_descriptors.
inline constexpr size_t kMaxCachedConvDescriptors = 256;
ConvDescriptors& conv_descriptors(const ConvKey& key, const Tensor& x, const Tensor& w, const Tensor& y,
                                  const ConvParams& params);

cudnnDataType_t cudnn_data_type(DType dtype);
cudnnMathType_t cudnn_math_type(ConvMath math);
ConvMath conv_math_of(cudnnMathType_t math);

}  // namespace kiln::cuda
