#!/usr/bin/env python3
"""Host cost per small op: Kiln builds beside PyTorch, in one run, as a Markdown table.

Runs each kiln_host_cost given (--kiln LABEL=PATH, repeatable: e.g. before=... after=...)
and, with --python, PyTorch's twin (host_cost_pytorch.py), --repeats times interleaved so
that a loaded machine slows every side alike; each cell is the median over the repeats of
each run's median nanoseconds per op. With --callgrind it also counts the instructions one
op costs in each Kiln build (valgrind's callgrind, Ir): the count of a run with --calls N2
minus one with N1, over the extra ops, so start-up cancels out. Instruction counts do not
depend on the machine's load, which makes them the before/after measure on a shared
machine. valgrind cannot run AVX-512 code: build the measured copies with
-DKILN_CPU_ARCH=x86-64-v3.

    python3 -m venv ~/torch-venv && ~/torch-venv/bin/pip install torch
    bench/host_cost/compare_host_cost.py --kiln before=/tmp/before/bin/kiln_host_cost \\
        --kiln after=build/bin/kiln_host_cost --python ~/torch-venv/bin/python --callgrind

PyTorch's times include the Python interpreter and its binding layer; its python_call and
tensor_dim rows show that layer's floor (see host_cost_pytorch.py).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_lines(command, env):
    result = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def collected_instructions(command, env):
    result = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + command, env=env,
                            check=True, capture_output=True, text=True)
    match = re.search(r"Collected : (\d+)", result.stderr)
    if not match:
        sys.exit("compare_host_cost: no instruction count in valgrind's output:\n" + result.stderr[-2000:])
    return int(match.group(1))


def instructions_per_op(binary, case, grad, device, env, low=500, high=1500):
    def count(calls):
        return collected_instructions([binary, "--device", device, "--case", case, "--grad", grad, "--calls",
                                       str(calls), "--rounds", "1"], env)
    # Two rounds run (one warm-up, one timed), each of `calls` ops.
    return (count(high) - count(low)) / (2 * (high - low))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", action="append", required=True, help="LABEL=PATH of a kiln_host_cost")
    parser.add_argument("--python", help="a Python with torch installed, to run PyTorch's twin beside")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args()
    kilns = [entry.split("=", 1) for entry in args.kiln]
    if any(len(k) != 2 for k in kilns):
        sys.exit("compare_host_cost: --kiln takes LABEL=PATH")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    common = ["--device", args.device, "--calls", str(args.calls), "--rounds", str(args.rounds)]

    times = {}  # (label, case, grad) -> [median_ns per repeat]
    torch_version = None
    for _ in range(args.repeats):
        for label, path in kilns:
            for line in run_lines([path] + common, env):
                times.setdefault((label, line["case"], line["grad"]), []).append(line["median_ns"])
        if args.python:
            for line in run_lines([args.python, os.path.join(HERE, "host_cost_pytorch.py")] + common, env):
                times.setdefault(("PyTorch", line["case"], line["grad"]), []).append(line["median_ns"])
                torch_version = line["torch"]

    labels = [label for label, _ in kilns] + (["PyTorch"] if args.python else [])
    rows = list(dict.fromkeys((case, grad) for (_, case, grad) in times))  # in the order the runs printed them
    header = ["case", "autograd"] + [f"{label} ns/op" for label in labels]
    if len(kilns) >= 2:
        header.append(f"{kilns[-1][0]} / {kilns[0][0]}")
    if args.callgrind:
        header += [f"{label} Ir/op" for label, _ in kilns]
        if len(kilns) >= 2:
            header.append(f"Ir {kilns[-1][0]} / {kilns[0][0]}")
    print(f"device {args.device}, {args.calls} calls x {args.rounds} rounds, median of {args.repeats} "
          f"interleaved repeats" + (f"; torch {torch_version}" if torch_version else ""))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for case, grad in rows:
        medians = {label: statistics.median(times[(label, case, grad)]) for label in labels
                   if (label, case, grad) in times}
        cells = [case, "on" if grad else "off"] + [f"{medians[label]:.0f}" if label in medians else "" for label in labels]
        first, last = kilns[0][0], kilns[-1][0]
        if len(kilns) >= 2:
            cells.append(f"{medians[last] / medians[first]:.2f}" if first in medians and last in medians else "")
        if args.callgrind:
            if (first, case, grad) in times:
                counts = [instructions_per_op(path, case, "1" if grad else "0", args.device, env) for _, path in kilns]
                cells += [f"{c:.0f}" for c in counts]
                if len(kilns) >= 2:
                    cells.append(f"{counts[-1] / counts[0]:.2f}")
            else:
                cells += [""] * (len(kilns) + (1 if len(kilns) >= 2 else 0))
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
