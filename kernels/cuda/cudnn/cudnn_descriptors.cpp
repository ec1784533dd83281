// The RAII descriptors of cudnn_descriptors.h: sizes checked against cuDNN's int limits,
// and a 1-d conv lifted to 2-d (Note [1-d convolution in cuDNN]).
#include "kernels/cuda/cudnn/cudnn_descriptors.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "kernels/cuda/cudnn/cudnn_check.h"

namespace kiln::cuda {
namespace {

// `values` as cuDNN's ints; a value past INT_MAX is a clear error, not a silent wrap.
std::vector<int> as_ints(const std::vector<int64_t>& values, const char* what) {
  std::vector<int> out;
  out.reserve(values.size());
  for (int64_t v : values) {
    KILN_CHECK(v >= 0 && v <= INT_MAX, "conv: ", what, " ", values, " exceeds cuDNN's limit of ", INT_MAX,
               " per dimension");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// Sizes and strides of a rank-3 (1-d conv) tensor with the unit dim inserted at index 2.
void lift_1d(std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  if (sizes.size() != 3) return;
  strides.insert(strides.begin() + 2, strides[2] * std::max<int64_t>(sizes[2], 1));
  sizes.insert(sizes.begin() + 2, 1);
}

// A per-spatial-dim parameter with the unit dim's `unit` value in front for a 1-d conv.
std::vector<int> spatial(IntList values, int64_t unit, const char* what) {
  std::vector<int64_t> lifted(values.begin(), values.end());
  if (lifted.size() == 1) lifted.insert(lifted.begin(), unit);
  return as_ints(lifted, what);
}

}  // namespace

cudnnDataType_t cudnn_data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: KILN_CHECK(false, "conv: cuDNN does not convolve dtype ", dtype); __builtin_unreachable();
  }
}

cudnnMathType_t cudnn_math_type(ConvMath math) {
  switch (math) {
    case ConvMath::Default: return CUDNN_DEFAULT_MATH;
    case ConvMath::TensorOp: return CUDNN_TENSOR_OP_MATH;
    case ConvMath::TensorOpAllowConversion: return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    case ConvMath::Fma: return CUDNN_FMA_MATH;
  }
  return CUDNN_DEFAULT_MATH;
}

ConvMath conv_math_of(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_TENSOR_OP_MATH: return ConvMath::TensorOp;
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return ConvMath::TensorOpAllowConversion;
    case CUDNN_FMA_MATH: return ConvMath::Fma;
    default: return ConvMath::Default;
  }
}

TensorDescriptor::TensorDescriptor() { KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
TensorDescriptor::~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }

void TensorDescriptor::set(const Tensor& t) {
  std::vector<int64_t> sizes = t.sizes(), strides = t.strides();
  lift_1d(sizes, strides);
  const std::vector<int> dims = as_ints(sizes, "tensor sizes");
  const std::vector<int> steps = as_ints(strides, "tensor strides");
  KILN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc_, cudnn_data_type(t.dtype()), static_cast<int>(dims.size()),
                                              dims.data(), steps.data()));
}

FilterDescriptor::FilterDescriptor() { KILN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_)); }
FilterDescriptor::~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }

void FilterDescriptor::set(const Tensor& weight, bool channels_last) {
  std::vector<int64_t> sizes = weight.sizes(), strides = weight.strides();
  lift_1d(sizes, strides);
  const std::vector<int> dims = as_ints(sizes, "weight sizes");
  // The dims stay in [K, C, spatial...] order in both formats; the format says the layout.
  const cudnnTensorFormat_t format = channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  KILN_CUDNN_CHECK(cudnnSetFilterNdDescriptor(desc_, cudnn_data_type(weight.dtype()), format,
                                              static_cast<int>(dims.size()), dims.data()));
}

ConvolutionDescriptor::ConvolutionDescriptor() { KILN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_)); }
ConvolutionDescriptor::~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }

void ConvolutionDescriptor::set(const ConvParams& params, DType dtype) {
  const std::vector<int> padding = spatial(params.padding, 0, "padding");
  const std::vector<int> stride = spatial(params.stride, 1, "stride");
  const std::vector<int> dilation = spatial(params.dilation, 1, "dilation");
  const cudnnDataType_t compute = dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  KILN_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(desc_, static_cast<int>(padding.size()), padding.data(),
                                                   stride.data(), dilation.data(), CUDNN_CROSS_CORRELATION, compute));
  KILN_CHECK(params.groups >= 1 && params.groups <= INT_MAX, "conv: groups ", params.groups,
             " out of cuDNN's range");
  KILN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(desc_, static_cast<int>(params.groups)));
}

void ConvolutionDescriptor::set_math_if_changed(ConvMath math) {
  if (math_ == math) return;
  KILN_CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, cudnn_math_type(math)));
  math_ = math;
}

ConvDescriptors::ConvDescriptors(const Tensor& x_tensor, const Tensor& w_tensor, const Tensor& y_tensor,
                                 const ConvParams& params, bool channels_last) {
  x.set(x_tensor);
  w.set(w_tensor, channels_last);
  y.set(y_tensor);
  conv.set(params, x_tensor.dtype());
}

ConvDescriptors& conv_descriptors(const ConvKey& key, const Tensor& x, const Tensor& w, const Tensor& y,
                                  const ConvParams& params) {
  thread_local std::unordered_map<ConvKey, std::unique_ptr<ConvDescriptors>, ConvKeyHash> cache;
  if (auto it = cache.find(key); it != cache.end()) return *it->second;
  if (cache.size() >= kMaxCachedConvDescriptors) cache.clear();
  auto made = std::make_unique<ConvDescriptors>(x, w, y, params, key.channels_last_filter);
  return *cache.emplace(key, std::move(made)).first->second;
}

}  // namespace kiln::cuda
