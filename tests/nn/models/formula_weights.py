"""The formulas the U-Net fixture scripts share with their C++ tests (formula_weights.h):
inputs, output weights and parameters computed on both sides instead of stored."""
import numpy as np
import torch


def pattern(shape, f, scale, phase):
    """f(scale i + phase) over the flat index i of `shape`, float64."""
    i = torch.arange(int(np.prod(shape)), dtype=torch.float64)
    return f(scale * i + phase).reshape(shape)


def weight(key, shape, norm_weight_suffix):
    """0.3 sin(0.61 j + phase) over the flat index j, phase = 0.1 x (the sum of the key's
    bytes mod 97); a norm's weight (a key ending in norm_weight_suffix) is 1 + that."""
    phase = 0.1 * (sum(key.encode()) % 97)
    w = 0.3 * pattern(shape, torch.sin, 0.61, phase)
    return w + 1.0 if key.endswith(norm_weight_suffix) else w
