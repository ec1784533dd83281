// The conv algorithm cache (conv_algorithm_cache.h) wired to the real cuDNN and the
// caching allocator: the process's one cache, the key of a convolution, and the choice
// for it. (Core's kiln::cudnn API reaches it through CudaBackend's conv_algorithm_*
// entries, defined in conv_algorithms.cpp.)
#pragma once

#include <cudnn.h>

#include "core/backend.h"
#include "core/cudnn.h"
#include "kernels/cuda/cudnn/conv_algorithm_cache.h"
#include "kernels/cuda/cudnn/cudnn_descriptors.h"
#include "kernels/cuda/stream.h"

namespace kiln::cuda {

// The process's cache (made on first use and never destroyed, Note [Leaked allocators]).
ConvAlgorithmCache& conv_algorithm_cache();

// cuDNN's math type for `dtype` (Note [TF32] in core/flags.h): tensor-op math for float16
// and bfloat16; for float32 the default math (TF32 allowed) when allow_tf32_conv(), FMA
// math (no TF32) otherwise; the default for float64.
ConvMath conv_math(DType dtype);

// The tensors of one pass (x, w, y as in ConvDescriptors); the pass writes one of them:
// y for forward, x for backward-data, w for backward-filter.
// All three are in one layout (Note [cuDNN layouts] in conv.cpp): channels_last says which.
struct ConvOperands {
  const Tensor& x;
  const Tensor& w;
  const Tensor& y;
  bool channels_last = false;
};

// The key of one pass: x is the input (or its gradient), w the weight (or its gradient),
// the filter's layout from channels_last.
ConvKey conv_key(ConvPass pass, const ConvOperands& operands, const ConvParams& params);

// Workspaces from the caching allocator on `stream`: null, not an error, when a request
// cannot be met. Must outlive the Choices whose workspaces it handed out.
class CachingWorkspaceMemory final : public WorkspaceMemory {
 public:
  explicit CachingWorkspaceMemory(Stream stream) : stream_(stream) {}
  void* try_allocate(size_t nbytes) override;
  void free(void* ptr) override;

 private:
  Stream stream_;
};

// Picks the algorithm for `key` (Note [Choosing a conv algorithm]), searching on a
// scratch copy of the written operand in benchmark mode, and returns it with its
// workspace from `memory`.
ConvAlgorithmCache::Choice choose_conv_algorithm(const ConvKey& key, cudnnHandle_t handle, ConvDescriptors& d,
                                                 const ConvOperands& operands, WorkspaceMemory& memory);

}  // namespace kiln::cuda
