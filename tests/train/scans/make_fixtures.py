#!/usr/bin/env python3
"""Writes the NIfTI fixtures of tests/train/test_scans.cpp with nibabel, an independent
NIfTI implementation, and what nibabel makes of them: one's own scans as a hospital's
export might give them, in orientations other than RAS and with anisotropic voxels.

- lps.nii.gz: int16 [6, 5, 4] with scl_slope 2 and scl_inter 1, voxel axes running left,
  posterior, superior (LPS, as DICOM exports), 1.5 x 2 x 1 mm voxels (sform).
- pir.nii.gz: float32 [5, 6, 4], voxel axes running posterior, inferior, right (a
  permutation with flips), 1 x 1 x 2.5 mm voxels (qform only).
- two_channel.nii: float32 [4, 5, 6, 2] (two channels in the 4th dim), RAS, 2 mm voxels.
- manifest.csv: the three as one's own scans (image, label).
expected.npz, per file NAME: NAME_canonical (nibabel.as_closest_canonical(img).get_fdata(),
float32, x y z [channel] as nibabel orders them) and NAME_zooms (the canonical image's
voxel sizes along x, y, z).

Needs nibabel and numpy (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import nibabel as nib
import numpy as np

rng = np.random.default_rng(29)
expected = {}


def save(name, image):
    nib.save(image, name)
    canonical = nib.as_closest_canonical(nib.load(name))
    key = name.split(".")[0]
    expected[key + "_canonical"] = canonical.get_fdata(dtype=np.float32)
    expected[key + "_zooms"] = np.array(canonical.header.get_zooms()[:3], dtype=np.float64)


# LPS: x runs left (-x world), y posterior (-y), z superior.
lps_affine = np.diag([-1.5, -2.0, 1.0, 1.0])
lps_affine[:3, 3] = [10, 20, -5]
lps = nib.Nifti1Image(rng.integers(-300, 300, size=(6, 5, 4)).astype(np.int16), lps_affine)
lps.header.set_slope_inter(2.0, 1.0)
lps.set_sform(lps_affine, code=1)
lps.set_qform(None, code=0)
save("lps.nii.gz", lps)

# PIR: voxel i runs posterior (-y), j inferior (-z), k right (+x).
pir_affine = np.zeros((4, 4))
pir_affine[1, 0] = -1.0
pir_affine[2, 1] = -1.0
pir_affine[0, 2] = 2.5
pir_affine[3, 3] = 1
pir = nib.Nifti1Image(rng.standard_normal((5, 6, 4)).astype(np.float32), None)
pir.set_qform(pir_affine, code=1)
pir.set_sform(None, code=0)
save("pir.nii.gz", pir)

two = nib.Nifti1Image(rng.standard_normal((4, 5, 6, 2)).astype(np.float32), np.diag([2.0, 2.0, 2.0, 1.0]))
save("two_channel.nii", two)

with open("manifest.csv", "w") as manifest:
    manifest.write("image,label\nlps.nii.gz,a\npir.nii.gz,b\ntwo_channel.nii,a\n")
np.savez("expected.npz", **expected)
