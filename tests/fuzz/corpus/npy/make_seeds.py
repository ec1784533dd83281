#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_npy (this folder's .npy files) with the standard library
only: each file is built from the format's description (numpy's NEP 1) as np.save lays it
out (version 1.0, header padded with spaces and a newline to a multiple of 64 bytes).
Run it from anywhere: python3 tests/fuzz/corpus/npy/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(descr, shape, data, fortran=False):
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + data


SEEDS = {
    "f4_2x3.npy": npy("<f4", (2, 3), struct.pack("<6f", *[i / 3 for i in range(6)])),
    # 2 x 2 x 2 in Fortran order: element [i, j, k] = 4 i + 2 j + k stored i fastest
    "f8_fortran.npy": npy("<f8", (2, 2, 2),
                          struct.pack("<8d", *[4 * i + 2 * j + k for k in range(2) for j in range(2) for i in range(2)]),
                          fortran=True),
    "i2_big_endian.npy": npy(">i2", (2,), struct.pack(">2h", -2, 300)),
    "bool_scalar.npy": npy("|b1", (), b"\x01"),
    "u1_empty.npy": npy("|u1", (0, 4), b""),
    "u4.npy": npy("<u4", (2,), struct.pack("<2I", 7, 4294967295)),
}

for name, data in SEEDS.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
