// One include for all of optim/: the optimizers, the learning-rate schedulers, GradScaler
// and gradient clipping.
#pragma once

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/cosine_annealing_lr.h"
#include "optim/cyclic_lr.h"
#include "optim/exponential_lr.h"
#include "optim/grad_scaler.h"
#include "optim/linear_lr.h"
#include "optim/lr_scheduler.h"
#include "optim/multi_step_lr.h"
#include "optim/one_cycle_lr.h"
#include "optim/optimizer.h"
#include "optim/reduce_lr_on_plateau.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "optim/step_lr.h"
