// Casting a model for mixed precision training (Apex's O2 and O3, train/amp.h).
//
// cast_parameters converts every floating parameter, its gradient and every floating
// buffer of a model to a lower dtype in place: each tensor keeps its identity (Note [Set
// data] in core/tensor.h), so layers' members and optimizers' lists see the cast values.
// Integer buffers (num_batches_tracked) keep their dtype. With keep_batchnorm_fp32 the
// batch-norm modules are skipped: kiln::batch_norm takes a float16/bfloat16 input with
// float32 weight and statistics and computes in float32 (core/ops/batch_norm.h), which keeps
// the running statistics accurate.
#pragma once

#include "core/dtype.h"
#include "nn/module.h"

namespace kiln::nn {

// BatchNorm1d/2d/3d (and anything derived from their common base).
bool is_batch_norm(const Module& module);

// dtype must be floating. Call it before an optimizer has state for these parameters
// (its buffers would keep the old dtype).
void cast_parameters(Module& model, DType dtype, bool keep_batchnorm_fp32);

}  // namespace kiln::nn
