// One include for all of optim/: the optimizers (and, where present, the learning-rate
// schedulers, GradScaler and gradient clipping).
#pragma once

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
// optim/lr_scheduler.h and optim/grad_scaler.h join here when they land.
