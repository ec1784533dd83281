// Kiln in one include: every public op of the core (tensors, autograd, autocast,
// safetensors), kiln::nn, kiln::optim, kiln::data (data/data.h), Apex-style mixed precision (train/amp.h), and
// kiln::init() with build_info(). Link the umbrella target Kiln::kiln (CMake) or `kiln`
// (pkg-config) and write:
//
//   #include <kiln/kiln.h>
//   int main() {
//     kiln::init();                               // register the backends, once
//     kiln::Tensor x = kiln::randn({2, 3});
//   }
#pragma once

#include "core/ops.h"
#include "core/safetensors.h"
#include "core/cuda_graph.h"
#include "core/stream.h"
#include "data/data.h"
#include "dist/ddp.h"
#include "dist/init_process_group.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/process_group_nccl.h"
#include "dist/process_group_ring.h"
#include "dist/rendezvous.h"
#include "dist/sync_batch_norm.h"
#include "dist/tcp_store.h"
#include "kiln/build_info.h"
#include "kiln/init.h"
#include "kiln/openmp_waits.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "train/amp.h"
#include "train/trainer.h"
#include "train/model_setup.h"
#include "train/data_setup.h"
#include "train/metrics.h"
#include "train/run_context.h"
#include "train/scans.h"
