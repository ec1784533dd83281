// cast_parameters (mixed_precision.h): walks the modules, skipping batch norm when asked,
// and casts each module's own floating tensors with set_data.
#include "nn/mixed_precision.h"

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "nn/batchnorm.h"

namespace kiln::nn {
namespace {

void cast_in_place(const Tensor& t, DType dtype) {
  if (t.defined() && t.is_floating_point() && t.dtype() != dtype) t.set_data(t.to(dtype));
}

}  // namespace

bool is_batch_norm(const Module& module) { return dynamic_cast<const BatchNormNd*>(&module) != nullptr; }

void cast_parameters(Module& model, DType dtype, bool keep_batchnorm_fp32) {
  KILN_CHECK(is_floating(dtype), "cast_parameters: expected a floating-point dtype, got ", dtype);
  NoGradGuard no_grad;
  for (const auto& [name, module] : model.named_modules()) {
    if (keep_batchnorm_fp32 && is_batch_norm(*module)) continue;
    for (const auto& [pname, p] : module->named_parameters(/*recurse=*/false)) {
      cast_in_place(p, dtype);
      cast_in_place(p.grad(), dtype);
    }
    for (const auto& [bname, b] : module->named_buffers(/*recurse=*/false)) cast_in_place(b, dtype);
  }
}

}  // namespace kiln::nn
