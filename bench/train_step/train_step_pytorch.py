#!/usr/bin/env python3
"""PyTorch's twin of kiln_train_step: the same networks, step and JSON line.

The networks are tests/nn/models/reference_models.py's (the same architectures and names
as Kiln's nn/models/): --model resnet18 | resnet50 (MedMNIST family) | densenet121
(3x3x3 stride-1 stem up to 32^3, 7x7x7 above; --memory-efficient 1: each dense layer's
concatenation, norm1, relu1, conv1, norm2 and relu2 under torch.utils.checkpoint, as
Kiln's mode). One step =
forward, cross-entropy, backward, Adam (foreach, PyTorch's default multi-tensor path),
zero_grad (to None), on a fixed random batch; --warmup untimed steps, then --steps timed
ones. --cuda 1 runs on cuda:0 (float32, cudnn.benchmark on, a synchronize ending each
step); TF32 is off unless --tf32 1 (PyTorch's default allows it in convolutions, Kiln's
does not). Peak memory is getrusage's, as in kiln_train_step, and on a GPU
torch.cuda.max_memory_allocated over the timed steps. Needs torch (a virtual environment:
compare_train_step.py's docstring); Kiln's build never depends on it.

PyTorch's best settings, for the GPU table beside Kiln's --graphs: --channels-last 1
(the model and the input in torch.channels_last_3d), --fused 1 (Adam(fused=True)),
--compile default|reduce-overhead (torch.compile of the whole step; reduce-overhead is
its CUDA-graph mode; the compile happens in the warm-up steps, so give it several), and
--bf16 1 (forward and loss under torch.autocast in bfloat16).
"""
import argparse
import json
import resource
import statistics
import time

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "nn", "models"))
from reference_models import DENSE_BLOCKS, DenseNet3d, ResNet3d  # noqa: E402


def make_model(args):
    if args.model == "densenet121":
        return DenseNet3d(DENSE_BLOCKS[121], classes=args.classes, memory_efficient=args.memory_efficient == 1,
                          small_input=args.side <= 32)
    return ResNet3d(50 if args.model == "resnet50" else 18, "MedMNIST", classes=args.classes)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=("resnet18", "resnet50", "densenet121"), default="resnet18")
    parser.add_argument("--memory-efficient", type=int, choices=(0, 1), default=0)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--side", type=int, default=28)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--classes", type=int, default=11)
    parser.add_argument("--cuda", type=int, choices=(0, 1), default=0)
    parser.add_argument("--tf32", type=int, choices=(0, 1), default=0)
    parser.add_argument("--channels-last", type=int, choices=(0, 1), default=0)
    parser.add_argument("--fused", type=int, choices=(0, 1), default=0)
    parser.add_argument("--compile", choices=("none", "default", "reduce-overhead"), default="none")
    parser.add_argument("--bf16", type=int, choices=(0, 1), default=0)
    args = parser.parse_args()

    device = torch.device("cuda:0" if args.cuda else "cpu")
    torch.backends.cudnn.benchmark = args.cuda == 1
    torch.backends.cudnn.allow_tf32 = args.tf32 == 1
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == 1
    torch.manual_seed(0)
    model = make_model(args).to(device)
    memory_format = torch.channels_last_3d if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, **({"fused": True} if args.fused else {}))
    inputs = torch.randn(args.batch, 1, args.side, args.side, args.side).to(device, memory_format=memory_format)
    target = torch.randint(0, args.classes, (args.batch,)).to(device)

    def train_step(x, y):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16 == 1):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step_fn = train_step if args.compile == "none" else torch.compile(train_step, mode=args.compile)
    seconds = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup and args.cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        step_fn(inputs, target)
        if args.cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            seconds.append(elapsed)

    median = statistics.median_high(seconds)
    print(json.dumps({
        "framework": f"pytorch {torch.__version__}",
        "model": args.model,
        "memory_efficient": args.memory_efficient == 1,
        "device": str(device),
        "tf32": args.tf32 == 1,
        "channels_last": args.channels_last == 1,
        "fused": args.fused == 1,
        "compile": args.compile,
        "bf16": args.bf16 == 1,
        "cudnn": torch.backends.cudnn.version() if args.cuda else None,
        "batch": args.batch,
        "side": args.side,
        "parameters": sum(p.numel() for p in model.parameters()),
        "threads": torch.get_num_threads(),
        "step_s": [round(s, 4) for s in seconds],
        "median_s": round(median, 4),
        "samples_per_s": round(args.batch / median, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "step_peak_allocated_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1) if args.cuda else None,
    }))


if __name__ == "__main__":
    main()
