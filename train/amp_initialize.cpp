// amp_initialize (amp.h): checks that the optimizer has not stepped yet, casts the model,
// and turns on the optimizer's master weights for O2. Its own file so that code using
// only the rest of amp.h does not pull in the optimizer's step machinery.
#include "train/amp.h"

#include "core/error.h"

namespace kiln::train {

AmpProperties amp_initialize(nn::Module& model, optim::Optimizer& optimizer, OptLevel level, DType low) {
  const AmpProperties properties = amp_properties(level, low);
  for (const optim::ParamGroup& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params) {
      KILN_CHECK(optimizer.state(p).empty(), "amp_initialize: the optimizer (", optimizer.name(),
                 ") already has state for a parameter of shape ", p.sizes(),
                 "; call amp_initialize before the first step");
    }
  }
  amp_cast_model(model, properties);
  if (properties.master_weights) optimizer.enable_master_weights();
  return properties;
}

}  // namespace kiln::train
