#!/usr/bin/env python3
"""Reads a Kiln event file with TensorBoard's own reader and prints one line per scalar:
"tag step value". Used by tests/train/test_tensorboard.cpp when `tensorboard` imports
(KILN_PYTHON names the interpreter); exits 3 when it does not, so the test can skip.
"""
import sys

try:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
except ImportError:
    sys.exit(3)

versions = 0
for event in EventFileLoader(sys.argv[1]).Load():
    if event.HasField("file_version"):
        versions += 1
        continue
    for value in event.summary.value:
        # TensorBoard's loader turns simple_value into a scalar tensor; read either.
        number = value.simple_value if value.HasField("simple_value") else value.tensor.float_val[0]
        print(f"{value.tag} {event.step} {number:.6g}")
print(f"file_version events: {versions}")
