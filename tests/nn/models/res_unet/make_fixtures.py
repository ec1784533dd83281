#!/usr/bin/env python3
"""Writes the fixture of tests/nn/models/test_res_unet.cpp: res_unet.npz and <case>_keys.txt.

For each case <name> of CASES, a float64 ResidualEncoderUNet of nnU-Net
(dynamic_network_architectures.architectures.unet, the network of nnU-Net's residual
encoder presets) with small features, instance norm (affine) and LeakyReLU, its
parameters set by `weight` (../formula_weights.py) from their names: "<name>_keys.txt" lists its state-dict keys in
order (nnU-Net registers each conv block's layers twice, as conv/norm and as
all_modules.N), and res_unet.npz holds the outputs "<name>/output/<k>" (highest resolution
first; one without deep supervision) in training mode for the input x[i] = 1.5 sin(0.37 i +
0.11), and the gradients "<name>/grad/<key>" of sum_k sum(output_k * w_k), w_k[i] =
cos(0.23 i + k), with respect to the input ("<name>/grad/input") and every parameter the
outputs use.

Needs torch, numpy and dynamic_network_architectures (a virtual environment; Kiln's build
never depends on them). Run from this folder: python3 make_fixtures.py
"""
import os
import sys

import numpy as np
import torch
from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from formula_weights import pattern, weight  # noqa: E402

CASES = {
    # isotropic, deep supervision, conv bias
    "isotropic": dict(args=dict(input_channels=1, n_stages=4, features_per_stage=[4, 8, 12, 16], kernel_sizes=3,
                                strides=[1, 2, 2, 2], n_blocks_per_stage=[1, 2, 2, 2], num_classes=3,
                                n_conv_per_stage_decoder=[1, 1, 1], conv_bias=True, deep_supervision=True),
                      input=(1, 1, 16, 16, 24)),
    # anisotropic kernels and strides as nnU-Net plans them for thick slices, no deep
    # supervision, no bias
    "anisotropic": dict(args=dict(input_channels=2, n_stages=3, features_per_stage=[4, 8, 8],
                                  kernel_sizes=[[1, 3, 3], [3, 3, 3], [3, 3, 3]],
                                  strides=[[1, 1, 1], [1, 2, 2], [2, 2, 2]], n_blocks_per_stage=[1, 1, 2],
                                  num_classes=2, n_conv_per_stage_decoder=[1, 2], conv_bias=False,
                                  deep_supervision=False),
                        input=(2, 2, 8, 16, 16)),
}


def case(out, name, spec):
    net = ResidualEncoderUNet(conv_op=nn.Conv3d, norm_op=nn.InstanceNorm3d,
                              norm_op_kwargs={"eps": 1e-5, "affine": True}, nonlin=nn.LeakyReLU,
                              nonlin_kwargs={"inplace": True}, **spec["args"]).double()
    with torch.no_grad():
        for key, p in net.named_parameters():
            p.copy_(weight(key, p.shape, "norm.weight"))
    net.train()
    with open(f"{name}_keys.txt", "w") as f:
        f.write("\n".join(net.state_dict().keys()) + "\n")
    x = (1.5 * pattern(spec["input"], torch.sin, 0.37, 0.11)).requires_grad_(True)
    outputs = net(x)
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    total = 0
    for k, y in enumerate(outputs):
        out[f"{name}/output/{k}"] = y.detach().numpy()
        total = total + (y * pattern(y.shape, torch.cos, 0.23, float(k))).sum()
    total.backward()
    out[f"{name}/grad/input"] = x.grad.numpy()
    for key, p in net.named_parameters():
        if p.grad is not None:  # without deep supervision the upper seg layers are unused
            out[f"{name}/grad/{key}"] = p.grad.numpy()


if __name__ == "__main__":
    out = {}
    for name, spec in CASES.items():
        case(out, name, spec)
    np.savez_compressed("res_unet.npz", **out)
    print("torch", torch.__version__, len(out), "arrays")
