#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/nn/models/test_basic_unet.cpp: basic_unet.npz.

For each case <name> of CASES, a float64 monai.networks.nets.BasicUNet with small
features, every parameter <key> (MONAI's names, which Kiln's BasicUNet uses) set by the
formula of `weight` (../formula_weights.py) from its name, the output "<name>/output" in training mode for the
input x[i] = 1.5 sin(0.37 i + 0.11) (flat index i; odd sizes, so UpCat pads) and the
gradients "<name>/grad/<key>" of sum(output * w), w[i] = cos(0.23 i), with respect to the
input ("<name>/grad/input") and every parameter; with batch norm also the running
statistics after the step ("<name>/after/<key>"). The formulas keep the file small; the
test computes them too.

Needs torch, numpy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import os
import sys

import numpy as np
import torch
from monai.networks.nets import BasicUNet

FEATURES = (4, 4, 6, 6, 8, 4)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from formula_weights import pattern, weight  # noqa: E402

CASES = {
    # MONAI's defaults: instance norm (affine), LeakyReLU(0.1), transposed-conv upsampling
    "default": dict(in_channels=1, out_channels=3),
    # batch norm, PReLU, trilinear upsampling (align_corners) after a 1x1x1 conv
    "batch_prelu_trilinear": dict(in_channels=2, out_channels=2, norm="batch", act="prelu",
                                  upsample="nontrainable"),
    # group norm, ReLU, no bias
    "group_relu_no_bias": dict(in_channels=1, out_channels=2, norm=("group", {"num_groups": 2}), act="relu",
                               bias=False),
}
INPUT = (1, 32, 18, 17)  # batch, then D, H, W after the channel (the bottom is 2 x 1 x 1)


def case(out, name, args):
    net = BasicUNet(spatial_dims=3, features=FEATURES, **args).double()
    with torch.no_grad():
        for key, p in net.named_parameters():
            p.copy_(weight(key, p.shape, "N.weight"))
    net.train()
    x = (1.5 * pattern((INPUT[0], args["in_channels"], *INPUT[1:]), torch.sin, 0.37, 0.11)).requires_grad_(True)
    y = net(x)
    w = pattern(y.shape, torch.cos, 0.23, 0.0)
    (y * w).sum().backward()
    out[f"{name}/output"] = y.detach().numpy()
    out[f"{name}/grad/input"] = x.grad.numpy()
    for key, p in net.named_parameters():
        out[f"{name}/grad/{key}"] = p.grad.numpy()
    for key, v in net.state_dict().items():
        if "running" in key or "num_batches" in key:
            out[f"{name}/after/{key}"] = v.numpy()


if __name__ == "__main__":
    import monai
    torch.manual_seed(20261202)
    out = {}
    for name, args in CASES.items():
        case(out, name, args)
    np.savez_compressed("basic_unet.npz", **out)
    print("torch", torch.__version__, "monai", monai.__version__, len(out), "arrays")
