// Apex-style mixed precision: the opt levels O0-O3 and what each does to a model and its
// optimizer (NVIDIA Apex's amp.initialize, whose table this follows).
//
//   level  autocast  model cast to low    batch norm   master weights  loss scale
//   O0     no        no (float32)         float32      no              static 1
//   O1     yes       no (float32)         float32      no              dynamic
//   O2     no        yes                  float32      yes             dynamic
//   O3     no        yes                  low          no              static 1
//
// O1 is what torch.autocast does: float32 weights, ops picking their precision (wrap the
// forward pass in `AutocastGuard autocast(amp.low_dtype, amp.enabled_autocast)`). O2 runs
// the model itself in the low dtype, batch norm excepted (it computes in float32 from a
// float16 input, core/ops/batch_norm.h), with float32 master weights in the optimizer (Note
// [Master weights] in optim/optimizer.h); its inputs go through amp_cast_input and its
// outputs through amp_cast_output, as Apex patches forward to do. O3 is everything in
// the low dtype: a speed baseline.
//
// Note [Loss in float32 under O2]: Apex casts a cast model's outputs back to float32 so
// that the loss is computed, and scaled, in float32. A float16 loss would not survive
// GradScaler: backward starts from d(loss * S)/d(loss) = S, and the default S = 2^16 is
// above float16's largest value (65504), so the gradient entering the loss is Inf and
// the first step is always skipped (then every step once the scale grows back); its
// log-softmax would also lose digits. tests/train/test_amp_training.cpp trains through
// this path.
//
// The low dtype is float16 by default, as in Apex; bfloat16 is allowed. bfloat16 has
// float32's exponent range, so gradients do not underflow and a loss scale is not
// needed; the table keeps Apex's scale settings anyway, and a GradScaler over bfloat16
// is harmless (its scale simply stays high, since no step overflows).
#pragma once

#include <string_view>

#include "core/dtype.h"
#include "core/tensor.h"
#include "nn/layer.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace kiln::train {

enum class OptLevel { O0, O1, O2, O3 };

// "O0".."O3" (the letter O), lower case accepted; anything else is a kiln::Error listing
// the valid names (with a hint when the letter O was typed as the digit 0).
OptLevel parse_opt_level(std::string_view name);
const char* name(OptLevel level);

struct AmpProperties {
  OptLevel level = OptLevel::O0;
  bool enabled_autocast = false;    // O1: run the forward pass under AutocastGuard(low_dtype)
  DType low_dtype = DType::Float16;
  bool cast_model = false;          // O2, O3: parameters and buffers cast to low_dtype
  bool keep_batchnorm_fp32 = true;  // with cast_model: batch-norm modules stay float32
  bool master_weights = false;      // O2: the optimizer keeps float32 copies
  bool dynamic_loss_scale = false;  // O1, O2: GradScaler's growing/backing-off scale
  double static_loss_scale = 1.0;   // the fixed scale when not dynamic
};

// The table above. low must be Float16 or BFloat16.
AmpProperties amp_properties(OptLevel level, DType low = DType::Float16);

// The model half of amp_initialize: checks that every floating parameter and buffer is
// float32 (amp casts the model itself) and casts the model as `properties` say.
void amp_cast_model(nn::Module& model, const AmpProperties& properties);

// Prepares `model` and `optimizer` (which holds the model's parameters) for `level`:
// casts the model (amp_cast_model) and, for O2, enables the optimizer's master weights.
// Must come before the optimizer's first step (an optimizer with state is an error).
// Returns the level's properties, for the training loop (autocast, GradScaler).
AmpProperties amp_initialize(nn::Module& model, optim::Optimizer& optimizer, OptLevel level,
                             DType low = DType::Float16);

// O2/O3: a floating input cast to the low dtype (float64 included, as Apex's patched
// forward does); otherwise, and for non-floating inputs, x unchanged.
Tensor amp_cast_input(const AmpProperties& properties, const Tensor& x);

// O2/O3: a float16/bfloat16 output (the model's logits) cast to float32 for the loss,
// differentiably (Note [Loss in float32 under O2]); otherwise y unchanged.
Tensor amp_cast_output(const AmpProperties& properties, const Tensor& y);

// The model's forward pass as a run's mixed precision makes it: the input cast for O2/O3
// and the output back to float32 (amp_cast_input, amp_cast_output). The caller holds the
// AutocastGuard of O1, so that the loss is computed under it too.
Tensor amp_forward(nn::Layer& model, const AmpProperties& properties, const Tensor& input);

}  // namespace kiln::train
