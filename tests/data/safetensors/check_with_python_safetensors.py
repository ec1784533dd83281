#!/usr/bin/env python3
"""Optional cross-check of the fixtures against the real Python `safetensors` package.

Not run by the test suite (it needs `pip install safetensors`). For each fixture it asks
the package's own serializer to write the same tensors and metadata (given in reverse
order) and checks the bytes are identical, and that its reader rejects
truncated.safetensors. Last run: safetensors 0.8.0, all identical.

Run from this folder: python3 check_with_python_safetensors.py
"""
import ctypes
import json
import struct

from safetensors import TensorSpec, deserialize, serialize

NAMES = {"F32": "float32", "F64": "float64", "F16": "float16", "BF16": "bfloat16",
         "I64": "int64", "I32": "int32", "U8": "uint8", "BOOL": "bool"}

buffers = []  # keeps the raw buffers alive while serialize reads them
ok = True
for name in ["all_dtypes", "names", "empty"]:
    with open(name + ".safetensors", "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", None)
    specs = {}
    for key, entry in reversed(list(header.items())):
        begin, end = entry["data_offsets"]
        buffer = ctypes.create_string_buffer(data[8 + n + begin:8 + n + end], max(end - begin, 1))
        buffers.append(buffer)
        specs[key] = TensorSpec(dtype=NAMES[entry["dtype"]], shape=entry["shape"],
                                data_ptr=ctypes.addressof(buffer), data_len=end - begin)
    same = bytes(serialize(specs, metadata=metadata)) == data
    ok = ok and same
    print(name, "identical" if same else "DIFFERENT")
try:
    with open("truncated.safetensors", "rb") as f:
        deserialize(f.read())
    print("truncated.safetensors accepted: WRONG")
    ok = False
except Exception as error:  # the package raises SafetensorError
    print("truncated.safetensors rejected:", error)
raise SystemExit(0 if ok else 1)
