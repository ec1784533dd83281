#!/usr/bin/env python3
"""The arithmetic floors of the segmentation benchmarks on this CPU: each pass's FLOPs
(torch.utils.flop_counter.FlopCounterMode over segmentation_bench_monai.py's networks:
convolutions and transposed convolutions, forward and backward; the memory-bound ops count
0 and are left out on purpose) over the float32 GEMM peak measured in the same run
(bench/train_step/step_flops.py's gemm_peak_flops). One JSON line per pass.

  segmentation_flops.py   (needs torch, monai and dynamic_network_architectures)
"""
import argparse
import json
import os
import sys

import torch
from torch.utils.flop_counter import FlopCounterMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "train_step"))
from segmentation_bench_monai import make_model  # noqa: E402
from step_flops import gemm_peak_flops  # noqa: E402


def count(fn):
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = p.parse_args()
    peak = gemm_peak_flops(args.threads)
    for model_name in ("unet", "resunet"):
        model = make_model(argparse.Namespace(model=model_name, classes=3))
        x = torch.randn(2, 1, 64, 64, 64)
        flops = count(lambda: model(x).sum().backward())
        print(json.dumps({"pass": f"{model_name} step, batch 2, 64^3", "gflop": flops / 1e9,
                          "gemm_peak_gflops": peak / 1e9, "floor_s": flops / peak}))
    model = make_model(argparse.Namespace(model="unet", classes=3)).eval()
    with torch.no_grad():
        window = count(lambda: model(torch.randn(1, 1, 96, 96, 96)))
    windows = 27  # 192^3 in 96^3 windows at overlap 0.5: starts 0, 48, 96 per axis
    print(json.dumps({"pass": "unet sliding window 192^3 (27 windows of 96^3)", "gflop": windows * window / 1e9,
                      "gemm_peak_gflops": peak / 1e9, "floor_s": windows * window / peak}))


if __name__ == "__main__":
    main()
