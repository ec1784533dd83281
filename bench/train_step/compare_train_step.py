#!/usr/bin/env python3
"""Kiln's and PyTorch's training step of a bundled 3D model (--model, default the ResNet-18),
interleaved in one run, and the ratio.

Each round runs kiln_train_step and then train_step_pytorch.py once per batch size, each in
its own process with the same thread count (OMP_NUM_THREADS and MKL_NUM_THREADS; torch
reads them too), so both see the same machine state; the table gives, per batch size, the
median over rounds of each program's median step, samples/s, the Kiln/PyTorch time ratio
(< 1: Kiln is faster) and each process's peak resident memory.

PyTorch comes from a virtual environment, never from Kiln's build:
    python3 -m venv ~/torch-venv && ~/torch-venv/bin/pip install torch
    bench/train_step/compare_train_step.py --kiln build/bin/kiln_train_step \
        --python ~/torch-venv/bin/python --batches 8,32 --rounds 2
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", required=True, help="path of kiln_train_step")
    parser.add_argument("--python", help="a Python with torch installed")
    parser.add_argument("--batches", default="8,32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--model", default="resnet18", help="resnet18, resnet50 or densenet121")
    parser.add_argument("--side", type=int, default=28)
    parser.add_argument("--memory-efficient", type=int, choices=(0, 1), default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    programs = {"kiln": [args.kiln]}
    if has_torch(args.python):
        programs["pytorch"] = [args.python, os.path.join(HERE, "train_step_pytorch.py")]
    else:
        print("compare_train_step: no torch in --python; measuring Kiln alone", file=sys.stderr)

    batches = [int(b) for b in args.batches.split(",")]
    results = {(name, b): [] for name in programs for b in batches}
    for round_index in range(args.rounds):
        for batch in batches:
            for name, command in programs.items():
                result = run(command + ["--batch", str(batch), "--steps", str(args.steps), "--model", args.model,
                                        "--side", str(args.side), "--memory-efficient", str(args.memory_efficient)],
                             args.threads)
                results[(name, batch)].append(result)
                print(f"round {round_index + 1} {name} batch {batch}: {json.dumps(result)}", file=sys.stderr)

    print(f"| batch | Kiln s/step | Kiln samples/s | Kiln peak MB |"
          f"{' PyTorch s/step | PyTorch samples/s | PyTorch peak MB | Kiln / PyTorch |' if 'pytorch' in programs else ''}")
    print("|---" * (8 if "pytorch" in programs else 4) + "|")
    for batch in batches:
        row = [str(batch)]
        medians = {}
        for name in programs:
            runs = results[(name, batch)]
            medians[name] = statistics.median([r["median_s"] for r in runs])
            row += [f"{medians[name]:.2f}", f"{batch / medians[name]:.2f}",
                    f"{max(r['peak_rss_mb'] for r in runs):.0f}"]
        if "pytorch" in programs:
            row.append(f"{medians['kiln'] / medians['pytorch']:.2f}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
