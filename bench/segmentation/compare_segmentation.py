#!/usr/bin/env python3
"""Runs kiln_segmentation_bench and segmentation_bench_monai.py side by side, interleaved
(Kiln, then MONAI, per configuration and layout, --rounds times), and prints a Markdown
table of each one's median seconds and Kiln's time over the fastest MONAI/PyTorch variant.

  bench/segmentation/compare_segmentation.py --kiln build/bin/kiln_segmentation_bench \\
      --python ~/torch-venv/bin/python --rounds 1
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = [
    ("U-Net (BasicUNet) step, batch 2, 64^3 patches",
     ["--what", "step", "--model", "unet", "--batch", "2", "--patch", "64", "--steps", "3", "--warmup", "1"]),
    ("ResEnc U-Net step, batch 2, 64^3 patches",
     ["--what", "step", "--model", "resunet", "--batch", "2", "--patch", "64", "--steps", "3", "--warmup", "1"]),
    ("U-Net sliding window, 192^3, 96^3 windows, overlap 0.5, 4 per batch, Gaussian",
     ["--what", "sliding-window", "--model", "unet", "--volume", "192", "--roi", "96", "--overlap", "0.5",
      "--sw-batch", "4", "--steps", "1", "--warmup", "0"]),
]


def run(command):
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kiln", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--layouts", default="0,1", help="channels-last settings to run, e.g. 0,1")
    p.add_argument("--only", default="", help="run the configurations whose title contains this")
    args = p.parse_args()
    monai = [args.python, os.path.join(HERE, "segmentation_bench_monai.py")]
    print("| what | Kiln NCDHW | Kiln channels-last | PyTorch contiguous | PyTorch channels_last_3d | Kiln's best / PyTorch's best |")
    print("|---|---|---|---|---|---|")
    for title, flags in CONFIGS:
        if args.only and args.only not in title:
            continue
        times = {}
        for _ in range(args.rounds):
            for layout in args.layouts.split(","):
                for name, command in (("kiln", [args.kiln]), ("monai", monai)):
                    result = run(command + flags + ["--channels-last", layout])
                    key = (name, layout)
                    times[key] = min(times.get(key, float("inf")), result["median_s"])
                    print(f"<!-- {title}: {name} channels-last {layout}: {result['median_s']:.3f} s -->", flush=True)
        cell = lambda k: f"{times[k]:.2f} s" if k in times else "-"
        kiln_best = min(v for (n, _), v in times.items() if n == "kiln")
        monai_best = min(v for (n, _), v in times.items() if n == "monai")
        print(f"| {title} | {cell(('kiln', '0'))} | {cell(('kiln', '1'))} | {cell(('monai', '0'))} | "
              f"{cell(('monai', '1'))} | {kiln_best / monai_best:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
