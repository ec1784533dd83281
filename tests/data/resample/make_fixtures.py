#!/usr/bin/env python3
"""Writes the PyTorch fixtures of tests/data/test_resample.cpp (Resize and the affine
resampler behind RandomAffine), as .npz files Kiln's own reader loads.

- resize.npz: a random [2, 5, 6, 7] float64 volume ("input") and
  torch.nn.functional.interpolate of it to [3, 4, 9] and to [8, 9, 4] with
  mode="trilinear", align_corners=False ("trilinear_3_4_9", ...) and mode="nearest"
  ("nearest_3_4_9", ...), PyTorch's legacy nearest (floor(dst * in / out)).
- affine.npz: a random [2, 7, 7, 7] float64 cube ("input"), the map "matrix" (3x3) and
  "offset" (3) in voxel coordinates, (D, H, W) order, with input = centre +
  matrix @ (output - centre - offset), and the volume resampled there by
  torch.nn.functional.affine_grid + grid_sample (align_corners=True, zero padding),
  with mode="bilinear" (trilinear in 3D: "trilinear") and mode="nearest" ("nearest").
  On a cube with align_corners=True, the normalised coordinates are the voxel
  coordinates about the centre divided by (n - 1) / 2, so the voxel-space map carries
  over; affine_grid orders coordinates (x, y, z) = (W, H, D), hence the reversals.

Needs torch and numpy (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import math

import numpy as np
import torch
import torch.nn.functional as F


def resize_fixture(rng):
    volume = rng.standard_normal((2, 5, 6, 7))
    out = {"input": volume}
    x = torch.from_numpy(volume)[None]
    for size in ((3, 4, 9), (8, 9, 4)):
        name = "_".join(str(s) for s in size)
        out["trilinear_" + name] = F.interpolate(x, size=size, mode="trilinear", align_corners=False)[0].numpy()
        out["nearest_" + name] = F.interpolate(x, size=size, mode="nearest")[0].numpy()
    np.savez("resize.npz", **out)


def rotation(axis, angle):
    # Rotation in the plane of the two other axes, (D, H, W) order.
    a, b = [k for k in range(3) if k != axis]
    m = np.eye(3)
    m[a, a], m[a, b], m[b, a], m[b, b] = math.cos(angle), -math.sin(angle), math.sin(angle), math.cos(angle)
    return m


def affine_fixture(rng):
    n = 7
    volume = rng.standard_normal((2, n, n, n))
    matrix = rotation(0, 0.3) @ rotation(1, -0.5) @ rotation(2, 0.8) @ np.diag([1.1, 0.9, 1.25])
    offset = np.array([0.6, -1.3, 0.25])
    centre = (n - 1) / 2
    # Normalised coordinates u = (index - centre) / centre: input_u = matrix @ (output_u - offset / centre).
    reverse = np.eye(3)[::-1]
    theta_matrix = reverse @ matrix @ reverse
    theta_offset = -theta_matrix @ (reverse @ offset / centre)
    theta = torch.from_numpy(np.concatenate([theta_matrix, theta_offset[:, None]], axis=1))[None]
    x = torch.from_numpy(volume)[None]
    grid = F.affine_grid(theta, x.shape, align_corners=True)
    out = {"input": volume, "matrix": matrix, "offset": offset}
    for mode, name in (("bilinear", "trilinear"), ("nearest", "nearest")):
        out[name] = F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=True)[0].numpy()
    np.savez("affine.npz", **out)


if __name__ == "__main__":
    generator = np.random.default_rng(20261126)
    resize_fixture(generator)
    affine_fixture(generator)
