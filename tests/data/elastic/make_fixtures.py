#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/data/test_elastic.cpp: elastic.npz.

For each case <k> of CASES: monai.transforms.Rand3DElastic(sigma_range=(s, s),
magnitude_range=(m, m), prob=1, padding_mode="zeros", mode) of "volume_<k>" (float32
[C, D, H, W]; for mode "nearest" a label map), with the uniform noise it drew
("noise_<k>", [3, D, H, W], its rand_offset) and the result "deformed_<k>".

Needs numpy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
from monai.transforms import Rand3DElastic

CASES = [((2, 10, 12, 9), 1.5, 2.0, "bilinear"), ((1, 9, 8, 11), 2.5, 4.0, "bilinear"),
         ((1, 10, 12, 9), 1.5, 3.0, "nearest")]

if __name__ == "__main__":
    import monai
    rng = np.random.default_rng(20261202)
    out = {}
    for k, (shape, sigma, magnitude, mode) in enumerate(CASES):
        if mode == "nearest":
            v = rng.integers(0, 4, shape).astype(np.float32)
        else:
            v = rng.standard_normal(shape).astype(np.float32)
        t = Rand3DElastic(sigma_range=(sigma, sigma), magnitude_range=(magnitude, magnitude), prob=1.0,
                          padding_mode="zeros", mode=mode)
        t.set_random_state(100 + k)
        deformed = t(torch.from_numpy(v))
        out[f"volume_{k}"], out[f"noise_{k}"] = v, t.rand_offset
        out[f"deformed_{k}"] = np.asarray(deformed)
    np.savez_compressed("elastic.npz", **out)
    print("monai", monai.__version__)
