#!/usr/bin/env python3
"""NPZ read speed, Kiln beside numpy, on the same files in the same run.

Runs kiln_bench's BM_NpzLoad (which writes $TMPDIR/kiln_bench_npz/{deflated,stored}.npz:
1188 uint8 sphere masks of 28^3, AdrenalMNIST3D's train split shape), then times numpy's
np.load(path)["train_images"] on those files, interleaved, and prints MB/s of decoded data
for both. numpy is optional: without it only Kiln is printed.

    bench/data/compare_npz_read.py --kiln-bench build/bin/kiln_bench [--python ~/venv/bin/python]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

NUMPY_TIMER = r"""
import sys, time
import numpy as np
path, rounds = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(rounds):
    start = time.perf_counter()
    a = np.load(path)["train_images"]
    times.append(time.perf_counter() - start)
times.sort()
print(a.nbytes / times[len(times) // 2] / 1e6)
"""


def kiln_rates(kiln_bench, tmpdir):
    out = subprocess.run([kiln_bench, "--benchmark_filter=^BM_NpzLoad/", "--benchmark_format=json",
                          "--benchmark_min_time=0.5"], check=True, capture_output=True, text=True,
                         env=dict(os.environ, TMPDIR=tmpdir)).stdout
    rates = {}
    for b in json.loads(out)["benchmarks"]:
        rates["deflated" if b["name"].startswith("BM_NpzLoad/1") else "stored"] = b["bytes/s"] / 1e6
    return rates


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln-bench", required=True)
    parser.add_argument("--python", default=sys.executable, help="a Python with numpy")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    tmpdir = tempfile.mkdtemp(prefix="kiln_npz_")
    rows = {"deflated": [], "stored": []}
    for _ in range(args.rounds):
        for kind, rate in kiln_rates(args.kiln_bench, tmpdir).items():
            rows[kind].append(("kiln", rate))
        for kind in rows:
            path = os.path.join(tmpdir, "kiln_bench_npz", kind + ".npz")
            done = subprocess.run([args.python, "-c", NUMPY_TIMER, path, "5"], capture_output=True, text=True)
            if done.returncode == 0:
                rows[kind].append(("numpy", float(done.stdout)))
    print("| archive | Kiln MB/s | numpy MB/s |")
    print("|---|---|---|")
    for kind, values in rows.items():
        kiln = [v for who, v in values if who == "kiln"]
        numpy = [v for who, v in values if who == "numpy"]
        best = lambda xs: "%.0f" % max(xs) if xs else "-"
        print("| %s | %s | %s |" % (kind, best(kiln), best(numpy)))


if __name__ == "__main__":
    main()
