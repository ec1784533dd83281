#!/usr/bin/env python3
"""Writes the safetensors fixtures of tests/core/test_safetensors.cpp.

Uses only the standard library, following the rules of Python's `safetensors` writer
(huggingface/safetensors, safetensors/src/tensor.rs `prepare`), so the bytes are the ones
`safetensors.torch.save_file` writes for the same tensors and metadata:
  * tensors ordered by dtype alignment, largest first (the crate's Dtype enum order
    I64 > F64 > F32 > I32 > BF16 > F16 > U8 > BOOL), then by name;
  * header: "__metadata__" first when given, then the tensors in that order, each
    {"dtype", "shape", "data_offsets"}, as compact JSON (serde_json: no spaces, non-ASCII
    raw, control characters escaped as \\n, \\t, ... or \\u00xx), padded with spaces to a
    multiple of 8 bytes;
  * 8-byte little-endian header length, header, then the data, little-endian, row-major.
Each fixture holds at most one metadata key: Python's metadata is a hash map, so the
order of several keys in its output is not defined.

Run from this folder: python3 make_fixtures.py
"""
import json
import struct

RANK = {"BOOL": 0, "U8": 1, "F16": 2, "BF16": 3, "I32": 4, "F32": 5, "F64": 6, "I64": 7}
PACK = {"F32": "f", "F64": "d", "F16": "e", "I64": "q", "I32": "i", "U8": "B", "BOOL": "?"}


def bf16_bytes(values):
    # bfloat16 is the upper half of a float32; the values used are exact in bfloat16.
    out = b""
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        assert bits & 0xFFFF == 0, v
        out += struct.pack("<H", bits >> 16)
    return out


def data_bytes(dtype, values):
    if dtype == "BF16":
        return bf16_bytes(values)
    return struct.pack("<%d%s" % (len(values), PACK[dtype]), *values)


def write(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, flat values)}."""
    order = sorted(tensors, key=lambda name: (-RANK[tensors[name][0]], name.encode("utf-8")))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name in order:
        dtype, shape, values = tensors[name]
        blob = data_bytes(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


write("all_dtypes.safetensors", {
    "f32": ("F32", [2, 3], [0.5, -1.25, 2.0, 3.75, -4.5, 6.0]),
    "a.z": ("F32", [1], [7.0]),
    "empty": ("F32", [0, 3], []),
    "f64": ("F64", [3], [0.1, -2.5, 1e300]),
    "f16": ("F16", [2, 2], [1.5, -0.25, 65504.0, 2.0 ** -10]),
    "bf16": ("BF16", [3], [1.5, -2.0, 0.15625]),
    "i64": ("I64", [2], [-2 ** 63, 2 ** 63 - 1]),
    "i32": ("I32", [], [-7]),
    "u8": ("U8", [4], [0, 1, 128, 255]),
    "bool": ("BOOL", [3], [True, False, True]),
}, metadata={"format": "pt"})

write("names.safetensors", {
    "emb\u00e9": ("F32", [1], [1.0]),
    "quote\"back\\slash": ("F32", [1], [2.0]),
    "ctl\t\u0001": ("F32", [1], [3.0]),
    "\U0001F600": ("F32", [1], [4.0]),
})

write("empty.safetensors", {})

# A corrupt file for the `kiln inspect` tests: all_dtypes without its last data byte.
with open("all_dtypes.safetensors", "rb") as f:
    whole = f.read()
with open("truncated.safetensors", "wb") as f:
    f.write(whole[:-1])
