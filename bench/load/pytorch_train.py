#!/usr/bin/env python3
"""PyTorch's side of bench/load/compare_under_load.py: the training loop `kiln train` runs
there, written as a PyTorch user writes it, on the same synthetic data.

A ResNet-18 of the MedMNIST family (tests/nn/models/reference_models.py, Kiln's own
architecture) at --width base channels, one input channel, two classes; random float32
volumes of --side^3 with random labels held in memory, served by a DataLoader with
--workers worker processes and batches of --batch (shuffled, the last partial one kept);
Adam 1e-3, cross-entropy, zero_grad to None; --epochs epochs. Prints one JSON line: the
training samples per second over the epochs (the first included, as Kiln's summary counts
it). Needs torch from a virtual environment; Kiln's build never depends on it.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "nn", "models"))
from reference_models import ResNet3d  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--side", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--width", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    images = torch.rand(args.samples, 1, args.side, args.side, args.side)
    labels = torch.randint(0, 2, (args.samples,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=args.batch,
                                         shuffle=True, num_workers=args.workers,
                                         persistent_workers=args.workers > 0)
    model = ResNet3d(18, "MedMNIST", classes=2, width=args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    seen = 0
    start = time.perf_counter()
    for _ in range(args.epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += y.numel()
    seconds = time.perf_counter() - start
    print(json.dumps({"samples_per_s": seen / seconds, "seconds": seconds, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
