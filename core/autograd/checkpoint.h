// Activation checkpointing: trade compute for memory.
//
// checkpoint(fn, inputs) runs fn(inputs) without recording a graph, so none of fn's
// intermediate activations are kept. Its outputs get one CheckpointBackward node; in
// backward that node re-runs fn on detached copies of the inputs with grad mode on and
// the random generators rewound to where the forward found them (so dropout draws the
// same mask), backpropagates through that fresh graph (parameters used inside fn get
// their .grad there), and hands the inputs' gradients on.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace kiln {

using CheckpointFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs);

// Note [Checkpoint recompute]: true on this thread while a checkpoint's backward re-runs
// its function. A layer whose forward has a side effect beyond its outputs asks this to
// do it once: BatchNormNd updates its running statistics (and num_batches_tracked) in the
// forward only, not again in the recompute, which normalises by the same batch statistics
// (PyTorch's checkpoint applies the momentum twice there).
bool checkpoint_recomputing();

}  // namespace kiln
