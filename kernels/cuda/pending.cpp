// TEMPORARY while the CUDA backend is being written: the entry points whose files are not
// in yet, so that everything links. Each family's author deletes its block. This file
// must be gone before the CUDA backend issue is closed.
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/pinned_allocator.h"

namespace kiln::cuda {

#define KILN_PENDING(what) KILN_CHECK(false, "cuda: ", what, " is not written yet")

// ---- allocators ----------------------------------------------------------------------------
Allocator& device_allocator(int) { KILN_PENDING("the caching allocator"); __builtin_unreachable(); }
void* raw_allocate(size_t, Stream) { KILN_PENDING("the caching allocator"); __builtin_unreachable(); }
void raw_free(void*) { KILN_PENDING("the caching allocator"); }
void record_stream(void*, Stream) { KILN_PENDING("the caching allocator"); }
AllocatorStats memory_stats(int) { KILN_PENDING("the caching allocator"); __builtin_unreachable(); }
void reset_peak_memory_stats(int) { KILN_PENDING("the caching allocator"); }
void empty_cache() { KILN_PENDING("the caching allocator"); }
bool caching_disabled() { KILN_PENDING("the caching allocator"); __builtin_unreachable(); }
Allocator& pinned_host_allocator() { KILN_PENDING("the pinned allocator"); __builtin_unreachable(); }
bool is_pinned(const void*) { KILN_PENDING("the pinned allocator"); __builtin_unreachable(); }
void record_host_use(const void*, Stream) { KILN_PENDING("the pinned allocator"); }
PinnedStats pinned_stats() { KILN_PENDING("the pinned allocator"); __builtin_unreachable(); }
void empty_pinned_cache() { KILN_PENDING("the pinned allocator"); }
// ---- end allocators ------------------------------------------------------------------------



// ---- reductions and softmax ----------------------------------------------------------------
void CudaBackend::reduce(ReduceOp, const Tensor&, const std::vector<int64_t>&, const Tensor&, const ReduceParams&) {
  KILN_PENDING("reduce");
}
void CudaBackend::var_mean(const Tensor&, const std::vector<int64_t>&, int64_t, const Tensor&, const Tensor&) {
  KILN_PENDING("var_mean");
}
void CudaBackend::arg_reduce(ArgReduceOp, const Tensor&, int64_t, const Tensor&, const Tensor&) {
  KILN_PENDING("arg_reduce");
}
void CudaBackend::softmax(const Tensor&, int64_t, bool, const Tensor&) { KILN_PENDING("softmax"); }
void CudaBackend::softmax_backward(const Tensor&, const Tensor&, int64_t, bool, const Tensor&) {
  KILN_PENDING("softmax_backward");
}
// ---- end reductions ------------------------------------------------------------------------



// ---- matrix products -----------------------------------------------------------------------
void CudaBackend::bmm(const Tensor&, const Tensor&, const Tensor&) { KILN_PENDING("bmm"); }
// ---- end matrix products -------------------------------------------------------------------



// ---- index and random ----------------------------------------------------------------------
void CudaBackend::gather(const Tensor&, int64_t, const Tensor&, const Tensor&) { KILN_PENDING("gather"); }
void CudaBackend::scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { KILN_PENDING("scatter_add"); }
void CudaBackend::index_select(const Tensor&, int64_t, const Tensor&, const Tensor&) { KILN_PENDING("index_select"); }
void CudaBackend::uniform(const Tensor&, double, double, PhiloxState) { KILN_PENDING("uniform"); }
void CudaBackend::normal(const Tensor&, double, double, PhiloxState) { KILN_PENDING("normal"); }
void CudaBackend::randint(const Tensor&, int64_t, int64_t, PhiloxState) { KILN_PENDING("randint"); }
void CudaBackend::randperm(const Tensor&, PhiloxState) { KILN_PENDING("randperm"); }
void CudaBackend::bernoulli(const Tensor&, double, PhiloxState) { KILN_PENDING("bernoulli"); }
// ---- end index and random ------------------------------------------------------------------

}  // namespace kiln::cuda
