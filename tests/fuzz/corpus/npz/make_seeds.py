#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_npz (this folder's .npz files) with the standard library
only: zip archives, stored and deflated, of the .npy files that ../npy/make_seeds.py
writes (run that first), as np.savez and np.savez_compressed lay them out.
Run it from anywhere: python3 tests/fuzz/corpus/npz/make_seeds.py"""
import os
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NPY = os.path.join(HERE, "..", "npy")


def member(name):
    with open(os.path.join(NPY, name), "rb") as f:
        return f.read()


def archive(path, members, method):
    with zipfile.ZipFile(os.path.join(HERE, path), "w", compression=method) as z:
        for key, npy in members:
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, member(npy))


archive("stored.npz", [("images", "f4_2x3.npy"), ("labels", "u4.npy")], zipfile.ZIP_STORED)
archive("deflated.npz", [("x", "f8_fortran.npy"), ("y", "i2_big_endian.npy"), ("empty", "u1_empty.npy")],
        zipfile.ZIP_DEFLATED)
archive("one.npz", [("flag", "bool_scalar.npy")], zipfile.ZIP_DEFLATED)
