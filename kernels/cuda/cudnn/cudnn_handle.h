// cuDNN handles: one per (device, host thread), bound to the current stream at each use.
//
// A cudnnHandle_t holds cuDNN's per-device state and must not be used by two threads at
// once, so, as for cuBLAS (cublas/cublas_handle.h), each thread creates its own for each
// device on first use and destroys it when the thread exits (RAII). cudnnSetStream runs
// before every use, so the convolution lands on the stream the caller is working on now.
// cuDNN takes its scratch memory as an explicit workspace argument per call
// (conv_algorithm_cache.h), so unlike cuBLAS the handle owns no workspace.
#pragma once

#include <cudnn.h>

#include "kernels/cuda/stream.h"

namespace kiln::cuda {

// The calling thread's cuDNN handle for `stream.device()`, bound to `stream`. The caller
// must have made stream.device() current (a DeviceGuard).
cudnnHandle_t cudnn_handle(Stream stream);

}  // namespace kiln::cuda
