#!/usr/bin/env python3
"""A training step's arithmetic floor on this CPU: its FLOPs over the float32 GEMM peak.

Counts the floating-point operations of one forward + backward of a bundled network
(PyTorch's twin from tests/nn/models/reference_models.py, the same architectures and
shapes as Kiln's nn/models/, as train_step_pytorch.py builds it), per op kind, with
torch.utils.flop_counter.FlopCounterMode (convolutions, their two backward passes and
the classifier's matmul; the memory-bound ops count 0 there and are left out on purpose).
Then measures the float32 GEMM peak of this machine in the same run (the best of a few
2048^3 torch.mm calls on the same threads) and prints one JSON line: the FLOPs, the peak,
and the floor = FLOPs / peak, the least time a step can take however its convolutions are
written. A step time far above the floor says convolution kernels can still gain; one
near it says they cannot, and neither can a ratio against another framework that uses
the same kernels.

  step_flops.py --model resnet18 --batch 8 --side 28

Needs torch (compare_train_step.py's docstring); Kiln's build never depends on it.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step_pytorch import make_model  # noqa: E402


def gemm_peak_flops(threads, n=2048, repeats=5):
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm-up
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2.0 * n ** 3 / (time.perf_counter() - start))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("resnet18", "resnet50", "densenet121"), default="resnet18")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--side", type=int, default=28)
    parser.add_argument("--classes", type=int, default=11)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    args.memory_efficient = 0

    torch.manual_seed(0)
    model = make_model(args)
    x = torch.randn(args.batch, 1, args.side, args.side, args.side)
    y = torch.randint(0, args.classes, (args.batch,))
    counter = FlopCounterMode(display=False)
    with counter:
        F.cross_entropy(model(x), y).backward()
    by_op = {str(op): count for op, count in counter.get_flop_counts()["Global"].items()}
    flops = counter.get_total_flops()
    peak = gemm_peak_flops(args.threads)
    print(json.dumps({
        "model": args.model,
        "batch": args.batch,
        "side": args.side,
        "threads": args.threads,
        "step_gflop": round(flops / 1e9, 1),
        "gflop_by_op": {op: round(count / 1e9, 1) for op, count in sorted(by_op.items())},
        "gemm_peak_gflop_per_s": round(peak / 1e9, 1),
        "floor_s": round(flops / peak, 3),
    }))


if __name__ == "__main__":
    main()
