#!/usr/bin/env python3
"""Kiln's and PyTorch's training step of a bundled 3D model (--model, default the ResNet-18),
interleaved in one run, and the ratio.

Each round runs kiln_train_step and then train_step_pytorch.py once per batch size and
variant (--channels-last 0,1: each program in NCDHW and in channels-last; --pytorch-compile
none,default: PyTorch eager and under torch.compile too), each in its own process with the
same thread count (OMP_NUM_THREADS and MKL_NUM_THREADS; torch reads them too), so all see
the same machine state; the table gives, per batch size and variant, the median over
rounds of each run's median step, samples/s, the process's peak resident memory, and the
time over PyTorch's fastest variant at that batch (< 1: faster than PyTorch's best).

PyTorch comes from a virtual environment, never from Kiln's build:
    python3 -m venv ~/torch-venv && ~/torch-venv/bin/pip install torch
    bench/train_step/compare_train_step.py --kiln build/bin/kiln_train_step \
        --python ~/torch-venv/bin/python --batches 8,32 --rounds 2 --channels-last 0,1
Without --python (or with a Python lacking torch) only Kiln is measured.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(command, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"compare_train_step: {' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def has_torch(python):
    return python and subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


# A variant: a program and the flags that set its layout (and PyTorch's compile mode).
def variants(args):
    layouts = [int(v) for v in args.channels_last.split(",")]
    out = [(f"kiln {LAYOUT[v]}", ["kiln"], ["--channels-last", str(v)]) for v in layouts]
    if has_torch(args.python):
        for mode in args.pytorch_compile.split(","):
            for v in layouts:
                name = f"pytorch {LAYOUT[v]}" + ("" if mode == "none" else f" compile={mode}")
                out.append((name, ["pytorch"], ["--channels-last", str(v), "--compile", mode]))
    else:
        print("compare_train_step: no torch in --python; measuring Kiln alone", file=sys.stderr)
    return out


LAYOUT = {0: "NCDHW", 1: "channels-last"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", required=True, help="path of kiln_train_step")
    parser.add_argument("--python", help="a Python with torch installed")
    parser.add_argument("--batches", default="8,32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (torch.compile compiles in them)")
    parser.add_argument("--model", default="resnet18", help="resnet18, resnet50 or densenet121")
    parser.add_argument("--side", type=int, default=28)
    parser.add_argument("--memory-efficient", type=int, choices=(0, 1), default=0)
    parser.add_argument("--channels-last", default="0", help="layouts to run each program in: 0, 1 or 0,1")
    parser.add_argument("--pytorch-compile", default="none", help="PyTorch's modes: none, default or both")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    programs = {"kiln": [args.kiln], "pytorch": [args.python, os.path.join(HERE, "train_step_pytorch.py")]}
    runs = variants(args)
    batches = [int(b) for b in args.batches.split(",")]
    results = {(name, b): [] for name, _, _ in runs for b in batches}
    for round_index in range(args.rounds):
        for batch in batches:
            for name, (program,), flags in runs:
                result = run(programs[program] + flags + [
                    "--batch", str(batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
                    "--model", args.model, "--side", str(args.side), "--memory-efficient",
                    str(args.memory_efficient)], args.threads)
                results[(name, batch)].append(result)
                print(f"round {round_index + 1} {name} batch {batch}: {json.dumps(result)}", file=sys.stderr)

    # One row per (batch, variant): the median over rounds of each run's median step, and
    # its time over the fastest PyTorch variant's at that batch (< 1: faster than PyTorch's best).
    print("| batch | variant | s/step | samples/s | peak MB | / PyTorch's best |")
    print("|---|---|---|---|---|---|")
    for batch in batches:
        medians = {name: statistics.median([r["median_s"] for r in results[(name, batch)]]) for name, _, _ in runs}
        torch_best = min((m for name, m in medians.items() if name.startswith("pytorch")), default=None)
        for name, _, _ in runs:
            ratio = f"{medians[name] / torch_best:.2f}" if torch_best else "-"
            peak = max(r["peak_rss_mb"] for r in results[(name, batch)])
            print(f"| {batch} | {name} | {medians[name]:.2f} | {batch / medians[name]:.2f} | {peak:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
