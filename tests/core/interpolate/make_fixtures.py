#!/usr/bin/env python3
"""Writes the PyTorch fixture of tests/core/test_interpolate.cpp: interpolate.npz.

For each case <name>: "<name>_input" (a random float64 [N, C, s...]), "<name>_output"
(torch.nn.functional.interpolate of it) and "<name>_grad" (the gradient of
sum(output * weights) with respect to the input, "<name>_weights" being a random tensor
of the output's shape). The cases cover linear, bilinear and trilinear with and without
align_corners, nearest and nearest-exact, by size and by (non-integer) scale factor, up and down.

Needs torch and numpy (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
import torch.nn.functional as F

CASES = {
    # name: (input shape, kwargs)
    "linear_size": ((2, 3, 7), dict(size=11, mode="linear", align_corners=False)),
    "linear_corners": ((2, 3, 7), dict(size=4, mode="linear", align_corners=True)),
    "bilinear_scale": ((1, 2, 5, 6), dict(scale_factor=(1.7, 0.6), mode="bilinear", align_corners=False)),
    "bilinear_corners": ((1, 2, 5, 6), dict(size=(9, 3), mode="bilinear", align_corners=True)),
    "trilinear_size": ((2, 1, 4, 5, 3), dict(size=(6, 3, 7), mode="trilinear", align_corners=False)),
    "trilinear_scale": ((1, 2, 4, 5, 3), dict(scale_factor=2.5, mode="trilinear", align_corners=False)),
    "trilinear_corners": ((1, 2, 4, 5, 3), dict(size=(7, 2, 5), mode="trilinear", align_corners=True)),
    "nearest_size": ((1, 2, 4, 5, 3), dict(size=(7, 3, 8), mode="nearest")),
    "nearest_scale": ((2, 2, 5, 7), dict(scale_factor=(0.7, 1.9), mode="nearest")),
    "nearest_exact_size": ((1, 2, 8, 5, 7), dict(size=(4, 3, 10), mode="nearest-exact")),
    "nearest_exact_scale": ((2, 1, 9, 6), dict(scale_factor=(0.5, 1.3), mode="nearest-exact")),
}

if __name__ == "__main__":
    torch.manual_seed(20261126)
    out = {}
    for name, (shape, kwargs) in CASES.items():
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        y = F.interpolate(x, **kwargs)
        w = torch.randn(y.shape, dtype=torch.float64)
        (y * w).sum().backward()
        out[name + "_input"] = x.detach().numpy()
        out[name + "_output"] = y.detach().numpy()
        out[name + "_weights"] = w.numpy()
        out[name + "_grad"] = x.grad.numpy()
    np.savez("interpolate.npz", **out)
    print("torch", torch.__version__)
