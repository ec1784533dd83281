#!/usr/bin/env python3
"""Writes the PyTorch fixture of tests/core/test_normalization.cpp: normalization.npz.

For each case <name>: "<name>_input", "<name>_weight", "<name>_bias" (float64), the
output "<name>_output" of torch.nn.functional.layer_norm / group_norm / instance_norm,
the gradients of sum(output * "<name>_weights_out") with respect to input, weight and
bias ("<name>_grad_input", "_grad_weight", "_grad_bias"); for instance norm with running
statistics also "<name>_running_mean"/"_running_var" before and "..._after" the call.

Needs torch and numpy (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
import torch.nn.functional as F


def case(out, name, x, w, b, fn, running=None):
    x = x.clone().requires_grad_(True)
    w = w.clone().requires_grad_(True)
    b = b.clone().requires_grad_(True)
    out[name + "_input"], out[name + "_weight"], out[name + "_bias"] = x.detach().numpy(), w.detach().numpy(), b.detach().numpy()
    if running is not None:
        out[name + "_running_mean"], out[name + "_running_var"] = running[0].numpy().copy(), running[1].numpy().copy()
    y = fn(x, w, b)
    g = torch.randn(y.shape, dtype=torch.float64)
    (y * g).sum().backward()
    out[name + "_output"], out[name + "_weights_out"] = y.detach().numpy(), g.numpy()
    out[name + "_grad_input"], out[name + "_grad_weight"], out[name + "_grad_bias"] = (
        x.grad.numpy(), w.grad.numpy(), b.grad.numpy())
    if running is not None:
        out[name + "_running_mean_after"], out[name + "_running_var_after"] = running[0].numpy(), running[1].numpy()


if __name__ == "__main__":
    torch.manual_seed(20261126)
    d = torch.float64
    out = {}
    case(out, "layer", torch.randn(2, 3, 4, 5, dtype=d), torch.randn(4, 5, dtype=d), torch.randn(4, 5, dtype=d),
         lambda x, w, b: F.layer_norm(x, (4, 5), w, b, eps=1e-5))
    case(out, "group", torch.randn(2, 6, 3, 4, 2, dtype=d), torch.randn(6, dtype=d), torch.randn(6, dtype=d),
         lambda x, w, b: F.group_norm(x, 3, w, b, eps=1e-5))
    case(out, "instance", torch.randn(2, 3, 4, 3, 5, dtype=d), torch.randn(3, dtype=d), torch.randn(3, dtype=d),
         lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-5))
    rm, rv = torch.randn(3, dtype=d), torch.rand(3, dtype=d) + 0.5
    case(out, "instance_running", torch.randn(2, 3, 4, 3, 5, dtype=d), torch.randn(3, dtype=d),
         torch.randn(3, dtype=d),
         lambda x, w, b: F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.2, eps=1e-5),
         running=(rm, rv))
    np.savez("normalization.npz", **out)
    print("torch", torch.__version__)
