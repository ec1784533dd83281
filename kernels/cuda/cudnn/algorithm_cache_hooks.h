// The CUDA backend's algorithm cache operations for core's kiln::cudnn API (core/cudnn.h,
// Note [Algorithm cache hooks] in core/cudnn.cpp). kiln::init() registers them. This
// header includes no cuDNN header, so code outside kernels/cuda/ can include it.
#pragma once

#include "core/cudnn.h"

namespace kiln::cuda {

// stats, reset_stats, clear, save and load on the process's conv algorithm cache; saved
// files are keyed by this machine's GPU names and cuDNN version (conv_algorithm_file.h).
const cudnn::AlgorithmCacheHooks& algorithm_cache_hooks();

}  // namespace kiln::cuda
