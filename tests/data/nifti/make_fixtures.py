#!/usr/bin/env python3
"""Writes the nibabel fixtures of tests/data/test_nifti.cpp: files written by an
independent NIfTI implementation, and nibabel's closest-canonical (RAS+) reorientation.

- oblique.nii.gz: NIfTI-1, int16 [5, 4, 3] with scl_slope 0.5, scl_inter -3, its voxel
  axes running (-y, +z, -x) with a small rotation, 2 x 1.5 x 3 mm voxels (sform code 1);
  oblique_expected.npz: "scaled" (the float32 volume as nibabel scales it, x fastest in
  the file), "affine" (the sform), "canonical" and "canonical_affine"
  (nibabel.as_closest_canonical), "orientation" (aff2axcodes as a uint8 array of letters).
- four_d.nii: NIfTI-2, float64 [3, 4, 2, 2] (two channels), qform only (code 1);
  four_d_expected.npz: "data" (as stored) and "affine" (the qform).

Needs nibabel and numpy (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import math

import nibabel as nib
import numpy as np


def rotation_z(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def oblique(rng):
    stored = rng.integers(-200, 200, size=(5, 4, 3)).astype(np.int16)
    axes = np.array([[0, 0, -1], [-1, 0, 0], [0, 1, 0]], dtype=float)  # i -> -y, j -> +z, k -> -x
    affine = np.eye(4)
    affine[:3, :3] = rotation_z(0.1) @ axes @ np.diag([2.0, 1.5, 3.0])
    affine[:3, 3] = [10.0, -20.0, 5.5]
    image = nib.Nifti1Image(stored, affine)
    image.header.set_data_dtype(np.int16)
    image.header.set_slope_inter(0.5, -3.0)
    image.set_sform(affine, code=1)
    image.set_qform(None, code=0)
    nib.save(image, "oblique.nii.gz")
    loaded = nib.load("oblique.nii.gz")
    canonical = nib.as_closest_canonical(loaded)
    np.savez("oblique_expected.npz",
             scaled=loaded.get_fdata().astype(np.float32),
             affine=loaded.affine,
             canonical=canonical.get_fdata().astype(np.float32),
             canonical_affine=canonical.affine,
             orientation=np.frombuffer("".join(nib.aff2axcodes(loaded.affine)).encode(), dtype=np.uint8))


def four_d(rng):
    data = rng.standard_normal((3, 4, 2, 2))
    affine = np.diag([1.25, 1.25, 2.5, 1.0])
    affine[:3, 3] = [-1.0, 2.0, 3.0]
    image = nib.Nifti2Image(data, affine)
    image.set_qform(affine, code=1)
    image.set_sform(None, code=0)
    nib.save(image, "four_d.nii")
    np.savez("four_d_expected.npz", data=data, affine=nib.load("four_d.nii").affine)


if __name__ == "__main__":
    generator = np.random.default_rng(20261126)
    oblique(generator)
    four_d(generator)
