// Apex opt levels (amp.h): parsing and naming them, their table of properties, casting a
// model, its inputs and its outputs for one. amp_initialize, which also touches the
// optimizer, is in amp_initialize.cpp.
#include "train/amp.h"

#include <cctype>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "nn/mixed_precision.h"
#include "train/choices.h"

namespace kiln::train {

OptLevel parse_opt_level(std::string_view name) {
  if (name.size() == 2 && (name[0] == 'O' || name[0] == 'o')) {
    switch (name[1]) {
      case '0': return OptLevel::O0;
      case '1': return OptLevel::O1;
      case '2': return OptLevel::O2;
      case '3': return OptLevel::O3;
      default: break;
    }
  }
  const bool digit_zero = name.size() == 2 && name[0] == '0' && std::isdigit(static_cast<unsigned char>(name[1]));
  KILN_CHECK(false, "amp: unknown opt level \"", std::string(name), "\"; expected one of O0, O1, O2, O3",
             digit_zero ? " (the first character is the letter O, not the digit zero)" : "");
  return OptLevel::O0;
}

const char* name(OptLevel level) { return choice_name(level); }

AmpProperties amp_properties(OptLevel level, DType low) {
  KILN_CHECK(low == DType::Float16 || low == DType::BFloat16, "amp: the low dtype must be float16 or bfloat16, got ",
             low);
  AmpProperties p{.level = level, .low_dtype = low};
  switch (level) {
    case OptLevel::O0: break;  // the defaults: float32 everything, loss scale 1
    case OptLevel::O1:
      p.enabled_autocast = true;
      p.dynamic_loss_scale = true;
      break;
    case OptLevel::O2:
      p.cast_model = true;
      p.keep_batchnorm_fp32 = true;
      p.master_weights = true;
      p.dynamic_loss_scale = true;
      break;
    case OptLevel::O3:
      p.cast_model = true;
      p.keep_batchnorm_fp32 = false;
      break;
  }
  return p;
}

void amp_cast_model(nn::Module& model, const AmpProperties& properties) {
  auto check_float32 = [&](const nn::NamedTensors& tensors, const char* what) {
    for (const auto& [tensor_name, t] : tensors) {
      KILN_CHECK(!t.is_floating_point() || t.dtype() == DType::Float32, "amp: ", what, " '", tensor_name,
                 "' has dtype ", t.dtype(), "; amp expects a float32 model and casts it itself (opt level ",
                 name(properties.level), ")");
    }
  };
  check_float32(model.named_parameters(), "parameter");
  check_float32(model.named_buffers(), "buffer");
  if (properties.cast_model) nn::cast_parameters(model, properties.low_dtype, properties.keep_batchnorm_fp32);
}

Tensor amp_cast_input(const AmpProperties& properties, const Tensor& x) {
  if (!properties.cast_model || !x.defined() || !x.is_floating_point()) return x;
  return x.to(properties.low_dtype);
}

Tensor amp_cast_output(const AmpProperties& properties, const Tensor& y) {
  if (!properties.cast_model || !y.defined() || (y.dtype() != DType::Float16 && y.dtype() != DType::BFloat16)) return y;
  return y.to(DType::Float32);
}

Tensor amp_forward(nn::Layer& model, const AmpProperties& properties, const Tensor& input) {
  return amp_cast_output(properties, model.forward(amp_cast_input(properties, input)));
}

}  // namespace kiln::train
