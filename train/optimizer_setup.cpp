// make_optimizer (train/optimizer_setup.h): one case per optimizer choice.
#include "train/optimizer_setup.h"

#include "core/error.h"
#include "optim/adam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

namespace kiln::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, Optimizer optimizer,
                                                 std::vector<Tensor> params) {
  switch (optimizer) {
    case Optimizer::Sgd:
      return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = config.lr,
                                                                               .momentum = config.momentum,
                                                                               .weight_decay = config.weight_decay,
                                                                               .nesterov = config.nesterov});
    case Optimizer::Adam:
      return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions{.lr = config.lr,
                                                                                 .beta1 = config.beta1,
                                                                                 .beta2 = config.beta2,
                                                                                 .eps = config.eps,
                                                                                 .weight_decay = config.weight_decay});
    case Optimizer::AdamW:
      return std::make_unique<optim::AdamW>(std::move(params),
                                            optim::AdamWOptions{.lr = config.lr,
                                                                .beta1 = config.beta1,
                                                                .beta2 = config.beta2,
                                                                .eps = config.eps,
                                                                .weight_decay = config.weight_decay});
    case Optimizer::RMSprop:
      return std::make_unique<optim::RMSprop>(std::move(params),
                                              optim::RMSpropOptions{.lr = config.lr,
                                                                    .alpha = config.alpha,
                                                                    .eps = config.eps,
                                                                    .weight_decay = config.weight_decay,
                                                                    .momentum = config.momentum});
  }
  throw Error("make_optimizer: unknown optimizer");
}

}  // namespace kiln::train
