// TEMPORARY stub (issue 5 contract commit): replaced by the real multi-tensor kernels
// before the issue lands. Every entry throws.
#include "kernels/cuda/cuda_backend.h"

#include <cstdlib>

#include "core/error.h"

namespace kiln::cuda {
namespace {
[[noreturn]] void unimplemented(const char* op) { KILN_CHECK(false, op, ": not implemented yet"); std::abort(); }
}  // namespace

void CudaBackend::sgd_step(const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
                    const SgdStepParams&, const AmpStepArgs&) { unimplemented("sgd_step"); }
void CudaBackend::adam_step(const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
                     const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
                     const AdamStepParams&, const AmpStepArgs&) { unimplemented("adam_step"); }
void CudaBackend::rmsprop_step(const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
                        const std::vector<Tensor>&, const std::vector<Tensor>&, const RmspropStepParams&,
                        const AmpStepArgs&) { unimplemented("rmsprop_step"); }
void CudaBackend::increment_steps(const std::vector<Tensor>&, const Tensor&) { unimplemented("increment_steps"); }
void CudaBackend::multi_tensor_scale(const std::vector<Tensor>&, const std::vector<Tensor>&, const Tensor&,
                              const Tensor&) { unimplemented("multi_tensor_scale"); }
void CudaBackend::multi_tensor_norm(const std::vector<Tensor>&, double, const Tensor&) { unimplemented("multi_tensor_norm"); }
void CudaBackend::amp_update_scale(const Tensor&, const Tensor&, const Tensor&, double, double, int64_t) {
  unimplemented("amp_update_scale");
}

}  // namespace kiln::cuda
