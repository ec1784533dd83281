#!/usr/bin/env python3
"""PyTorch's twin of kiln_host_cost: the same small ops, the same JSON lines.

Each case runs --calls ops back to back, --rounds times after one warm-up round, on float32
[4, 4] matrices, a [4] row and a 4^3 volume with a 3^3 filter (requires_grad with grad 1).
The time includes Python's interpreter and PyTorch's binding layer, which a C++ caller of
Kiln does not pay. Two extra cases measure that layer's floor so a reader can subtract it:
  python_call   a call of a Python function that returns its first argument (the loop and
                one call, no PyTorch)
  tensor_dim    t.dim(): one call through PyTorch's binding that does no ATen work
On a GPU (--device cuda) the loop ends with torch.cuda.synchronize(). Needs torch (a
virtual environment: compare_host_cost.py's docstring); Kiln's build never depends on it.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def operands(device, requires_grad):
    generator = torch.Generator().manual_seed(7)
    made = [torch.randn(*shape, generator=generator).to(device) for shape in ((4, 4), (4, 4), (4,), (1, 1, 4, 4, 4),
                                                                             (1, 1, 3, 3, 3))]
    for t in made:
        t.requires_grad_(requires_grad)
    return made


def identity(a, b):
    return a


CASES = {
    "add": lambda a, b, row, volume, filt: torch.add(a, b),
    "add_broadcast": lambda a, b, row, volume, filt: torch.add(a, row),
    "mul_scalar": lambda a, b, row, volume, filt: torch.mul(a, 2.0),
    "relu": lambda a, b, row, volume, filt: torch.relu(a),
    "sum": lambda a, b, row, volume, filt: torch.sum(a),
    "mean_dim": lambda a, b, row, volume, filt: torch.mean(a, 1),
    "view": lambda a, b, row, volume, filt: a.view(16),
    "transpose": lambda a, b, row, volume, filt: torch.transpose(a, 0, 1),
    "conv3d": lambda a, b, row, volume, filt: F.conv3d(volume, filt, None, 1, 1),
    "python_call": lambda a, b, row, volume, filt: identity(a, b),
    "tensor_dim": lambda a, b, row, volume, filt: a.dim(),
}


def time_rounds(op, args, device, calls, rounds):
    per_op = []
    for round_number in range(rounds + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            op(*args)
        if device.type == "cuda":
            torch.cuda.synchronize()
        ns = (time.perf_counter() - start) * 1e9
        if round_number > 0:
            per_op.append(ns / calls)
    return sorted(per_op)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--case", default="all")
    parser.add_argument("--grad", choices=("0", "1", "both"), default="both")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    names = list(CASES) if args.case == "all" else [args.case]
    grads = [False, True] if args.grad == "both" else [args.grad == "1"]
    for name in names:
        for grad in grads:
            per_op = time_rounds(CASES[name], operands(device, grad), device, args.calls, args.rounds)
            print(json.dumps({"case": name, "device": args.device, "grad": grad, "calls": args.calls,
                              "median_ns": round(per_op[len(per_op) // 2], 1), "min_ns": round(per_op[0], 1),
                              "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
