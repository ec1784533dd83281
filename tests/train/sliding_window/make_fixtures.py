#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/train/test_sliding_window.cpp: sliding_window.npz.

For each case <name> of CASES: the input "<name>/input" (float64 [B, C, d...]) and
"<name>/output", monai.inferers.sliding_window_inference of it with the case's window,
overlap, blending, batch of windows and padding value, and the predictor below. The
predictor depends on where a window lies (a ramp over the window's own coordinates and the
window's mean), so a voxel covered by several windows gets different values from each and
the blend weights, the window positions and the padding all show in the output.

Needs torch, numpy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
from monai.inferers import sliding_window_inference

OUT_CHANNELS = 2


def predictor(x):
    """[n, C, w...] -> [n, 2, w...]: y_c = (c + 1) x_0 + ramp + c mean(x_0 over the window),
    ramp = sum_d 0.1^(d+1) i_d over the window's own coordinates i."""
    spatial = x.shape[2:]
    ramp = torch.zeros(spatial, dtype=x.dtype)
    for d, n in enumerate(spatial):
        shape = [1] * len(spatial)
        shape[d] = n
        ramp = ramp + 0.1 ** (d + 1) * torch.arange(n, dtype=x.dtype).reshape(shape)
    x0 = x[:, 0]
    mean = x0.reshape(x0.shape[0], -1).mean(1).reshape([-1] + [1] * len(spatial))
    return torch.stack([(c + 1) * x0 + ramp + c * mean for c in range(OUT_CHANNELS)], 1)


CASES = {
    "constant": dict(shape=(2, 1, 20, 17, 13), roi=(8, 8, 8), overlap=0.25, mode="constant", sw_batch_size=3),
    "gaussian": dict(shape=(1, 2, 19, 16, 21), roi=(8, 6, 10), overlap=0.5, mode="gaussian", sw_batch_size=4),
    "padded": dict(shape=(1, 2, 6, 20, 9), roi=(8, 8, 8), overlap=0.6, mode="gaussian", sigma_scale=0.25,
                   sw_batch_size=5, cval=-1.5),
    "no_overlap_whole_dim": dict(shape=(2, 1, 16, 11, 12), roi=(16, 5, 7), overlap=0.0, mode="constant",
                                 sw_batch_size=2),
}


if __name__ == "__main__":
    import monai
    torch.manual_seed(20261202)
    out = {}
    for name, args in CASES.items():
        args = dict(args)
        x = torch.randn(*args.pop("shape"), dtype=torch.float64)
        roi = args.pop("roi")
        y = sliding_window_inference(x, roi, args.pop("sw_batch_size"), predictor, **args)
        out[name + "/input"], out[name + "/output"] = x.numpy(), y.numpy()
    np.savez_compressed("sliding_window.npz", **out)
    print("torch", torch.__version__, "monai", monai.__version__, len(CASES), "cases")
