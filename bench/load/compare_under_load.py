#!/usr/bin/env python3
"""Training throughput under load, Kiln beside PyTorch (issue: the trainer under load).

For each count J of concurrent jobs (--jobs, default 1,2,3), starts J copies of one
training run at once and waits for all, first J `kiln train` runs, then J runs of
pytorch_train.py (the same network, data size, batch, loader workers and epochs; PyTorch
from a virtual environment: --python). Each job reports its training samples per second
(Kiln: summary.json's samples_per_s; PyTorch: its JSON line). The table gives, per J, the
mean per-job rate, the total, and the share of one job alone that J jobs deliver together
(total / alone: 1.0 is fair time sharing of the same cores, below it is throughput lost to
the contention). Run it on an otherwise idle machine: the point is the load the jobs make
themselves. --rounds repeats everything and keeps each cell's median.

    python3 -m venv ~/torch-venv && ~/torch-venv/bin/pip install torch numpy
    bench/load/compare_under_load.py --kiln build/bin/kiln --python ~/torch-venv/bin/python
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def kiln_job(args, folder, index):
    out = os.path.join(folder, f"kiln-{index}")
    command = [args.kiln, "train", "--model", "resnet18", "--stem", "medmnist", "--width", str(args.width / 64),
               "--size", str(args.side), "--synthetic-samples", str(args.samples), "--batch-size", str(args.batch),
               "--epochs", str(args.epochs), "--workers", str(args.workers), "--device", "cpu",
               "--eval-every", "1000", "--out", out]
    return command, lambda: json.load(open(os.path.join(out, "summary.json")))["samples_per_s"]


def pytorch_job(args, folder, index):
    command = [args.python, os.path.join(HERE, "pytorch_train.py"), "--samples", str(args.samples), "--side",
               str(args.side), "--batch", str(args.batch), "--epochs", str(args.epochs), "--workers",
               str(args.workers), "--width", str(args.width)]
    return command, None


def run_together(make_job, args, jobs):
    with tempfile.TemporaryDirectory() as folder:
        started = []
        for index in range(jobs):
            command, read = make_job(args, folder, index)
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            started.append((process, read))
        rates = []
        for process, read in started:
            out, err = process.communicate()
            if process.returncode != 0:
                sys.exit(f"a job failed ({process.returncode}): {err[-2000:]}")
            rates.append(read() if read else json.loads(out.strip().splitlines()[-1])["samples_per_s"])
        return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", default="build/bin/kiln")
    parser.add_argument("--python", default="", help="a Python with torch; without it only Kiln is measured")
    parser.add_argument("--jobs", default="1,2,3")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--side", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--width", type=int, default=16, help="the first stage's channels (64 is full width)")
    args = parser.parse_args()
    frameworks = [("Kiln", kiln_job)] + ([("PyTorch", pytorch_job)] if args.python else [])
    counts = [int(j) for j in args.jobs.split(",")]
    results = {}
    for _ in range(args.rounds):
        for name, make_job in frameworks:
            for jobs in counts:
                results.setdefault((name, jobs), []).append(run_together(make_job, args, jobs))
    print(f"| framework | jobs at once | samples/s per job (mean) | total | share of one alone |")
    print("|---|---|---|---|---|")
    for name, _ in frameworks:
        alone = statistics.median(sum(r) for r in results[(name, counts[0])]) if counts[0] == 1 else None
        for jobs in counts:
            total = statistics.median(sum(r) for r in results[(name, jobs)])
            share = f"{total / alone:.2f}" if alone else "-"
            print(f"| {name} | {jobs} | {total / jobs:.1f} | {total:.1f} | {share} |")


if __name__ == "__main__":
    main()
