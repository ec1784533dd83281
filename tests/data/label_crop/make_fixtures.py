#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/data/test_label_crop.cpp: label_crop.npz.

"centers", "sizes", "shapes" ([N, 3] int64, random, with sizes up to the shape and centres
also outside the volume) and "corrected" ([N, 3]), monai.transforms.utils.
correct_crop_centers of each row.

Needs numpy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
from monai.transforms.utils import correct_crop_centers

if __name__ == "__main__":
    import monai
    rng = np.random.default_rng(20261202)
    shapes = rng.integers(1, 40, size=(300, 3))
    sizes = np.stack([rng.integers(1, s + 1) for s in shapes.ravel()]).reshape(shapes.shape)
    centers = np.stack([rng.integers(-3, s + 3) for s in shapes.ravel()]).reshape(shapes.shape)
    corrected = np.array([correct_crop_centers(c.tolist(), z.tolist(), s.tolist()) for c, z, s in
                          zip(centers, sizes, shapes)], dtype=np.int64)
    np.savez("label_crop.npz", centers=centers.astype(np.int64), sizes=sizes.astype(np.int64),
             shapes=shapes.astype(np.int64), corrected=corrected)
    print("monai", monai.__version__, len(shapes), "rows")
