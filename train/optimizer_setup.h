// The optimizer of a run, by its configuration's choice, with the configuration's options.
//
//   auto optimizer = train::make_optimizer(config, choices.optimizer, model.parameters());
#pragma once

#include <memory>
#include <vector>

#include "optim/optimizer.h"
#include "train/config.h"

namespace kiln::train {

// sgd, adam, adamw or rmsprop: lr, momentum (sgd, rmsprop), nesterov (sgd), weight decay,
// betas and eps (adam, adamw), alpha and eps (rmsprop).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, Optimizer optimizer,
                                                 std::vector<Tensor> params);

}  // namespace kiln::train
