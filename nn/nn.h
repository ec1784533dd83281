// Everything of kiln::nn in one include: Module and containers, layers, losses, init and
// the bundled models (nn/models/).
#pragma once

#include "nn/activation.h"
#include "nn/batchnorm.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "nn/normalization.h"
#include "nn/upsample.h"
#include "nn/init.h"
#include "nn/layer.h"
#include "nn/linear.h"
#include "nn/load_report.h"
#include "nn/loss.h"
#include "nn/mixed_precision.h"
#include "nn/models/densenet3d.h"
#include "nn/models/layers.h"
#include "nn/models/resnet3d.h"
#include "nn/module.h"
#include "nn/pooling.h"
#include "nn/serialize.h"
