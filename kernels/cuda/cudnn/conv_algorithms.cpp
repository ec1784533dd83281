// The algorithm cache over the real cuDNN (conv_algorithms.h): CudnnAlgorithmSource asks
// cuDNN's heuristics (cudnnGet*Algorithm_v7) and times algorithms (cudnnFind*AlgorithmEx)
// for one pass; CachingWorkspaceMemory hands out workspaces from the caching allocator and
// answers "no" instead of throwing when memory is short (the allocator has already
// released its cache and retried by then); and the hooks save and load the
// cache keyed by this machine's GPU and cuDNN.
#include "kernels/cuda/cudnn/conv_algorithms.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/flags.h"
#include "core/host_sync.h"
#include "core/kernel_memory.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cudnn/conv_algorithm_file.h"
#include "kernels/cuda/cudnn/cudnn_check.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

// The host code's algorithm ranges (Note [Usable algorithms]) are cuDNN's.
static_assert(kConvAlgorithmCount[static_cast<int>(ConvPass::Forward)] == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
static_assert(kConvAlgorithmCount[static_cast<int>(ConvPass::BackwardData)] == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
static_assert(kConvAlgorithmCount[static_cast<int>(ConvPass::BackwardFilter)] ==
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);

namespace {

// The perf results cuDNN ran successfully, as the cache's ConvAlgorithms, with their
// times when a search measured them (`timed`; heuristics' perf times mean nothing). The
// three passes' perf structs have the same fields.
template <typename Perf>
std::vector<ConvAlgorithm> supported(const std::vector<Perf>& perf, int returned, bool timed) {
  std::vector<ConvAlgorithm> out;
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    out.push_back({.algo = static_cast<int>(perf[i].algo),
                   .math = conv_math_of(perf[i].mathType),
                   .workspace_bytes = perf[i].memory,
                   .deterministic = perf[i].determinism == CUDNN_DETERMINISTIC,
                   .time_ms = timed ? perf[i].time : -1.0f});
  }
  return out;
}

// cuDNN's side of Note [Choosing a conv algorithm] for one convolution pass.
class CudnnAlgorithmSource final : public ConvAlgorithmSource {
 public:
  CudnnAlgorithmSource(cudnnHandle_t handle, ConvDescriptors& d, const ConvOperands& operands)
      : handle_(handle), d_(d), operands_(operands) {}

  std::vector<ConvAlgorithm> heuristics(const ConvKey& key) override {
    d_.conv.set_math_if_changed(key.math);
    switch (key.pass) {
      case ConvPass::Forward: return with_workspace_sizes(key, forward_heuristics());
      case ConvPass::BackwardData: return with_workspace_sizes(key, backward_data_heuristics());
      case ConvPass::BackwardFilter: return with_workspace_sizes(key, backward_filter_heuristics());
    }
    return {};
  }

  size_t max_workspace_bytes(const ConvKey& key) override {
    size_t most = 0;
    for (const ConvAlgorithm& algorithm : heuristics(key)) most = std::max(most, algorithm.workspace_bytes);
    return most;
  }

  // Times the algorithms writing into a scratch tensor shaped like the pass's output, so
  // the caller's output is never touched by the search (the chosen algorithm computes it
  // afterwards).
  std::vector<ConvAlgorithm> search(const ConvKey& key, void* workspace, size_t workspace_bytes) override {
    // A search runs and times every algorithm and waits for them: not inside a graph.
    KILN_CHECK(!capturing_on_this_thread(), "conv: a cuDNN benchmark-mode search (", describe(key),
               ") during a CUDA graph capture; run the step once eagerly before capturing, so every "
               "convolution's algorithm is chosen");
    return with_workspace_sizes(key, timed(key, workspace, workspace_bytes));
  }

 private:
  std::vector<ConvAlgorithm> timed(const ConvKey& key, void* workspace, size_t workspace_bytes) {
    d_.conv.set_math_if_changed(key.math);
    const Tensor& written = key.pass == ConvPass::Forward        ? operands_.y
                            : key.pass == ConvPass::BackwardData ? operands_.x
                                                                 : operands_.w;
    const Tensor scratch = allocate_tensor(written.sizes(), written.dtype(), written.device());
    const void* x = operands_.x.data_ptr();
    const void* w = operands_.w.data_ptr();
    const void* y = operands_.y.data_ptr();
    switch (key.pass) {
      case ConvPass::Forward: {
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
        int n = 0;
        KILN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            handle_, d_.x.get(), x, d_.w.get(), w, d_.conv.get(), d_.y.get(), scratch.data_ptr(),
            static_cast<int>(perf.size()), &n, perf.data(), workspace, workspace_bytes));
        return supported(perf, n, /*timed=*/true);
      }
      case ConvPass::BackwardData: {
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
        int n = 0;
        KILN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
            handle_, d_.w.get(), w, d_.y.get(), y, d_.conv.get(), d_.x.get(), scratch.data_ptr(),
            static_cast<int>(perf.size()), &n, perf.data(), workspace, workspace_bytes));
        return supported(perf, n, /*timed=*/true);
      }
      case ConvPass::BackwardFilter: {
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
        int n = 0;
        KILN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            handle_, d_.x.get(), x, d_.y.get(), y, d_.conv.get(), d_.w.get(), scratch.data_ptr(),
            static_cast<int>(perf.size()), &n, perf.data(), workspace, workspace_bytes));
        return supported(perf, n, /*timed=*/true);
      }
    }
    return {};
  }

  // Note [Conv workspace sizes]: the workspace an algorithm is run with is what
  // cudnnGet*WorkspaceSize says for it in the math type it will run in, not only the
  // `memory` its perf result reported (which heuristics may estimate): the larger of the
  // two. An algorithm whose size cuDNN will not give is dropped.
  std::vector<ConvAlgorithm> with_workspace_sizes(const ConvKey& key, std::vector<ConvAlgorithm> algorithms) {
    std::vector<ConvAlgorithm> out;
    for (ConvAlgorithm algorithm : algorithms) {
      d_.conv.set_math_if_changed(run_as(key, algorithm).math);
      size_t bytes = 0;
      if (workspace_size(key.pass, algorithm.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
      algorithm.workspace_bytes = std::max(algorithm.workspace_bytes, bytes);
      out.push_back(algorithm);
    }
    d_.conv.set_math_if_changed(key.math);
    return out;
  }

  cudnnStatus_t workspace_size(ConvPass pass, int algo, size_t* bytes) const {
    switch (pass) {
      case ConvPass::Forward:
        return cudnnGetConvolutionForwardWorkspaceSize(handle_, d_.x.get(), d_.w.get(), d_.conv.get(), d_.y.get(),
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
      case ConvPass::BackwardData:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, d_.w.get(), d_.y.get(), d_.conv.get(),
                                                            d_.x.get(),
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
      case ConvPass::BackwardFilter:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            handle_, d_.x.get(), d_.y.get(), d_.conv.get(), d_.w.get(),
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  std::vector<ConvAlgorithm> forward_heuristics() {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    int n = 0;
    KILN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle_, d_.x.get(), d_.w.get(), d_.conv.get(),
                                                            d_.y.get(), static_cast<int>(perf.size()), &n,
                                                            perf.data()));
    return supported(perf, n, /*timed=*/false);
  }

  std::vector<ConvAlgorithm> backward_data_heuristics() {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    int n = 0;
    KILN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, d_.w.get(), d_.y.get(), d_.conv.get(),
                                                                 d_.x.get(), static_cast<int>(perf.size()), &n,
                                                                 perf.data()));
    return supported(perf, n, /*timed=*/false);
  }

  std::vector<ConvAlgorithm> backward_filter_heuristics() {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
    int n = 0;
    KILN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, d_.x.get(), d_.y.get(),
                                                                   d_.conv.get(), d_.w.get(),
                                                                   static_cast<int>(perf.size()), &n, perf.data()));
    return supported(perf, n, /*timed=*/false);
  }

  cudnnHandle_t handle_;
  ConvDescriptors& d_;
  const ConvOperands& operands_;
};

// This machine as an algorithm file sees it: the distinct GPU names and cuDNN's version.
AlgorithmCacheIdentity this_machine() {
  std::set<std::string> names;
  for (int device = 0; device < device_count(); ++device) names.insert(device_properties(device).name);
  std::string gpu;
  for (const std::string& name : names) {
    if (!gpu.empty()) gpu += ", ";
    gpu += name;
  }
  return {.gpu = gpu, .cudnn_version = static_cast<int64_t>(cudnnGetVersion())};
}

}  // namespace

void* CachingWorkspaceMemory::try_allocate(size_t nbytes) {
  if (nbytes > device_properties(stream_.device()).total_memory) return nullptr;  // no point asking
  try {
    return raw_allocate(nbytes, stream_);
  } catch (const Error&) {
    // In a capture, falling back to an algorithm with a smaller workspace would make the
    // graph compute otherwise than the eager steps did: the error goes on instead.
    if (capturing_on_this_thread()) throw;
    return nullptr;
  }
}

void CachingWorkspaceMemory::free(void* ptr) { raw_free(ptr); }

ConvAlgorithmCache& conv_algorithm_cache() {
  static auto* cache = new ConvAlgorithmCache();
  return *cache;
}

ConvMath conv_math(DType dtype) {
  switch (dtype) {
    case DType::Float16:
    case DType::BFloat16: return ConvMath::TensorOp;
    case DType::Float32: return allow_tf32_conv() ? ConvMath::Default : ConvMath::Fma;
    default: return ConvMath::Default;
  }
}

ConvKey conv_key(ConvPass pass, const ConvOperands& operands, const ConvParams& params) {
  const Tensor &x = operands.x, &w = operands.w;
  return {.pass = pass,
          .device = x.device().index,
          .dtype = x.dtype(),
          .math = conv_math(x.dtype()),
          .deterministic = cudnn::deterministic(),
          .groups = params.groups,
          .input_sizes = x.sizes(),
          .input_strides = x.strides(),
          .weight_sizes = w.sizes(),
          .channels_last_filter = operands.channels_last,
          .stride = params.stride,
          .padding = params.padding,
          .dilation = params.dilation};
}

ConvAlgorithmCache::Choice choose_conv_algorithm(const ConvKey& key, cudnnHandle_t handle, ConvDescriptors& d,
                                                 const ConvOperands& operands, WorkspaceMemory& memory) {
  CudnnAlgorithmSource source(handle, d, operands);
  return conv_algorithm_cache().choose(key, cudnn::benchmark(), source, memory);
}

cudnn::Stats CudaBackend::conv_algorithm_stats() { return conv_algorithm_cache().stats(); }

void CudaBackend::reset_conv_algorithm_stats() { conv_algorithm_cache().reset_stats(); }

std::vector<cudnn::ConvUse> CudaBackend::conv_uses() { return conv_uses_of(conv_algorithm_cache().entries()); }

void CudaBackend::clear_conv_algorithm_cache() { conv_algorithm_cache().clear(); }

cudnn::SaveReport CudaBackend::save_conv_algorithm_cache(const std::string& path) {
  return write_algorithm_file(conv_algorithm_cache().entries(), path, this_machine());
}

cudnn::LoadReport CudaBackend::load_conv_algorithm_cache(const std::string& path) {
  return read_algorithm_file(conv_algorithm_cache(), path, this_machine());
}

}  // namespace kiln::cuda
