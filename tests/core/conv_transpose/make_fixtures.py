#!/usr/bin/env python3
"""Writes the PyTorch fixture of tests/core/test_conv_transpose.cpp: conv_transpose.npz.

For each case <name>: "<name>_input", "<name>_weight", "<name>_bias" (random float64),
"<name>_output" (torch.nn.functional.conv_transpose{1,2,3}d of them) and the gradients
"<name>_grad_input", "<name>_grad_weight", "<name>_grad_bias" of sum(output * weights),
"<name>_weights" being a random tensor of the output's shape. The cases cover strides,
padding, output_padding (below the stride, and between the stride and the dilation),
dilation and groups in 1, 2 and 3 spatial dims, and MedicalNet's segmentation head's
2x upsampling (kernel 2, stride 2).

Needs torch and numpy (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
import torch.nn.functional as F

CASES = {
    # name: (spatial dims, input shape, weight shape, kwargs)
    "plain1d": (1, (2, 3, 7), (3, 4, 3), dict()),
    "strided1d": (1, (2, 4, 5), (4, 3, 4), dict(stride=3, padding=1, output_padding=2)),
    "groups2d": (2, (2, 4, 5, 4), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0), groups=2)),
    "dilated2d": (2, (1, 2, 4, 5), (2, 3, 3, 3), dict(stride=2, padding=2, output_padding=1, dilation=(2, 3))),
    # stride <= output_padding < dilation: the cropped path, with zeros past the full output
    "cropped2d": (2, (1, 2, 4, 3), (2, 2, 3, 2), dict(stride=1, padding=(1, 0), output_padding=(2, 1), dilation=(3, 2))),
    "up3d": (3, (2, 4, 3, 4, 2), (4, 2, 2, 2, 2), dict(stride=2)),
    "general3d": (3, (1, 4, 3, 3, 4), (4, 3, 3, 2, 3), dict(stride=(2, 1, 3), padding=(1, 0, 2), output_padding=(1, 0, 2), groups=2, dilation=(1, 2, 1))),
}

if __name__ == "__main__":
    torch.manual_seed(20261126)
    functions = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
    out = {}
    for name, (spatial, input_shape, weight_shape, kwargs) in CASES.items():
        groups = kwargs.get("groups", 1)
        x = torch.randn(input_shape, dtype=torch.float64, requires_grad=True)
        w = torch.randn(weight_shape, dtype=torch.float64, requires_grad=True)
        b = torch.randn(weight_shape[1] * groups, dtype=torch.float64, requires_grad=True)
        y = functions[spatial](x, w, b, **kwargs)
        weights = torch.randn(y.shape, dtype=torch.float64)
        (y * weights).sum().backward()
        for key, value in dict(input=x, weight=w, bias=b, output=y, weights=weights, grad_input=x.grad,
                               grad_weight=w.grad, grad_bias=b.grad).items():
            out[f"{name}_{key}"] = value.detach().numpy()
    np.savez("conv_transpose.npz", **out)
    print("torch", torch.__version__)
