#!/usr/bin/env python3
"""Writes the seeds of fuzz_nifti: small NIfTI-1 and NIfTI-2 files (.nii, and one
gzip-compressed), packed field by field from the standard's header layouts with the
standard library only (struct, gzip).

Run from this folder: python3 make_seeds.py
"""
import gzip
import struct


def nifti1(dims, datatype, bitpix, voxels, slope=0.0, inter=0.0, sform=None):
    """The 348-byte NIfTI-1 header (nifti1.h's field order), then 4 extension bytes."""
    dim = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    srow = sform or [[0.0] * 4] * 3
    header = struct.pack(
        "<i10s18sihcB8h3f4h8f3fhBB2f2f2i80s24s2h6f12f16s4s",
        348, b"", b"", 0, 0, b"r", 0, *dim,  # sizeof_hdr .. dim
        0.0, 0.0, 0.0, 0, datatype, bitpix, 0,  # intent_p1-3, intent_code, datatype, bitpix, slice_start
        1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,  # pixdim (qfac first)
        352.0, slope, inter, 0, 0, 2,  # vox_offset, scl_slope, scl_inter, slice_end, slice_code, xyzt_units (mm)
        0.0, 0.0, 0.0, 0.0, 0, 0,  # cal_max, cal_min, slice_duration, toffset, glmax, glmin
        b"kiln fuzz seed", b"", 0, 1 if sform else 0,  # descrip, aux_file, qform_code, sform_code
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, *srow[0], *srow[1], *srow[2], b"", b"n+1\0")
    assert len(header) == 348, len(header)
    return header + b"\0" * 4 + voxels


def nifti2(dims, datatype, bitpix, voxels):
    """The 540-byte NIfTI-2 header (nifti2.h's field order), then 4 extension bytes."""
    dim = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    header = struct.pack(
        "<i8s2h8q3d8dq6d2q80s24s2i6d12d3i16sc15s",
        540, b"n+2\0\r\n\x1a\n", datatype, bitpix, *dim,  # sizeof_hdr, magic, datatype, bitpix, dim
        0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,  # intent_p1-3, pixdim
        544, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0,  # vox_offset, scl_*, cal_*, slice_duration, toffset, slice_*
        b"", b"", 0, 0, *([0.0] * 18),  # descrip, aux_file, qform/sform codes, quatern, offsets, srows
        0, 2, 0, b"", b"\0", b"")  # slice_code, xyzt_units, intent_code, intent_name, dim_info, unused
    assert len(header) == 540, len(header)
    return header + b"\0" * 4 + voxels


seeds = {
    "u1_2x2x2.nii": nifti1([2, 2, 2], 2, 8, bytes(range(8))),
    "i2_scaled_sform.nii": nifti1([3, 2, 1], 4, 16, struct.pack("<6h", -3, -2, -1, 1, 2, 3), 0.5, -1.0,
                                  [[0.0, 0.0, -2.0, 1.0], [1.5, 0.0, 0.0, 2.0], [0.0, 1.0, 0.0, 3.0]]),
    "f4_4d.nii": nifti1([2, 1, 1, 2], 16, 32, struct.pack("<4f", 1.0, -2.0, 3.5, 0.25)),
    "f8_nifti2.nii": nifti2([2, 2, 1], 64, 64, struct.pack("<4d", 0.5, 1.5, 2.5, 3.5)),
}
for name, data in seeds.items():
    with open(name, "wb") as f:
        f.write(data)
with open("u1_2x2x2.nii.gz", "wb") as f:
    f.write(gzip.compress(seeds["u1_2x2x2.nii"], mtime=0))
