// One include for all of optim/: the optimizers (and, where present, the learning-rate
// schedulers, GradScaler and gradient clipping).
#pragma once

#include "optim/adam.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
// optim/lr_scheduler.h, optim/grad_scaler.h and optim/clip_grad.h join here when they land.
