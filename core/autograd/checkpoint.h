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

}  // namespace kiln
