#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/data/test_foreground_crop.cpp: foreground_crop.npz.

For each case <k> of CASES: "volume_<k>" (float32 [2, D, H, W], mostly 0 with a few
positive voxels; one case has them at the edge so the margin pads), "box_<k>" ([2, 3]:
start, end of monai.transforms.utils.generate_spatial_bounding_box(margin, allow_smaller=
False)) and "cropped_<k>": monai.transforms.CropForeground(margin=margin) of it.

Needs numpy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
from monai.transforms import CropForeground
from monai.transforms.utils import generate_spatial_bounding_box

CASES = [((2, 12, 10, 9), 0, [(3, 4, 5), (6, 2, 3)]),
         ((2, 12, 10, 9), (2, 1, 3), [(0, 9, 5), (11, 0, 8)]),
         ((2, 8, 7, 6), 2, [(4, 3, 2)])]

if __name__ == "__main__":
    import monai
    rng = np.random.default_rng(20261202)
    out = {}
    for k, (shape, margin, points) in enumerate(CASES):
        v = np.where(rng.random(shape) < 0.5, -rng.random(shape), 0).astype(np.float32)
        for c, p in enumerate(points):
            v[c % 2][p] = 1.0 + rng.random()
        start, end = generate_spatial_bounding_box(torch.from_numpy(v), margin=margin, allow_smaller=False)
        out[f"volume_{k}"] = v
        out[f"box_{k}"] = np.asarray([start, end], dtype=np.int64)
        out[f"cropped_{k}"] = np.asarray(CropForeground(margin=margin)(torch.from_numpy(v)))
    np.savez("foreground_crop.npz", **out)
    print("monai", monai.__version__)
