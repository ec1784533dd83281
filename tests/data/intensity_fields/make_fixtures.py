#!/usr/bin/env python3
"""Writes the MONAI fixture of tests/data/test_intensity_fields.cpp: intensity_fields.npz.

"volume" (float32 [2, 12, 10, 9]); "smooth_<k>": monai.transforms.GaussianSmooth(sigma) of
it for the sigmas of SIGMAS; "field_<k>": MONAI's RandBiasField field for the shape, degree
and coefficients of FIELDS ("coefficients_<k>"), i.e. exp of _generate_random_field.

Needs numpy and monai (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
from monai.transforms import GaussianSmooth, RandBiasField

SIGMAS = [(0.5, 1.0, 1.7), (0.3, 0.3, 0.3), (2.5, 0.8, 1.2)]
FIELDS = [((12, 10, 9), 3), ((5, 7, 6), 1), ((4, 9, 11), 2)]

if __name__ == "__main__":
    import monai
    rng = np.random.default_rng(20261202)
    volume = rng.standard_normal((2, 12, 10, 9)).astype(np.float32)
    out = {"volume": volume}
    for k, sigma in enumerate(SIGMAS):
        out[f"smooth_{k}"] = np.asarray(GaussianSmooth(sigma=sigma)(torch.from_numpy(volume)))
    for k, (shape, degree) in enumerate(FIELDS):
        t = RandBiasField(degree=degree)
        n = int(np.prod([(degree + i) / i for i in range(1, 4)]))
        coefficients = rng.uniform(-0.3, 0.3, n)
        out[f"coefficients_{k}"] = coefficients
        out[f"field_{k}"] = np.exp(t._generate_random_field(shape, degree, coefficients.tolist())).astype(np.float32)
    np.savez("intensity_fields.npz", **out)
    print("monai", monai.__version__)
