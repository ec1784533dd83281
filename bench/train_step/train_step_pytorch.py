#!/usr/bin/env python3
"""PyTorch's twin of kiln_train_step: the same network, step and JSON line.

The MedMNIST-style 3D ResNet-18 (resnet18_3d.h describes it), one step = forward,
cross-entropy, backward, Adam (foreach, PyTorch's default multi-tensor path), zero_grad
(to None), on a fixed random batch; --warmup untimed steps, then --steps timed ones.
--cuda 1 runs on cuda:0 (float32, cudnn.benchmark on, a synchronize ending each step);
TF32 is off unless --tf32 1 (PyTorch's default allows it in convolutions, Kiln's does not).
Peak memory is getrusage's, as in kiln_train_step. Needs torch (a virtual environment:
compare_train_step.py's docstring); Kiln's build never depends on it.
"""
import argparse
import json
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock3d(nn.Module):
    def __init__(self, inp, out, stride):
        super().__init__()
        self.conv1 = nn.Conv3d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm3d(out)
        self.conv2 = nn.Conv3d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm3d(out)
        self.shortcut = nn.Sequential()
        if stride != 1 or inp != out:
            self.shortcut = nn.Sequential(nn.Conv3d(inp, out, 1, stride, bias=False), nn.BatchNorm3d(out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNet18For3d(nn.Module):
    def __init__(self, in_channels, classes):
        super().__init__()
        self.conv1 = nn.Conv3d(in_channels, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm3d(64)
        width = 64
        for stage in range(4):
            out = 64 << stage
            stride = 1 if stage == 0 else 2
            setattr(self, f"layer{stage + 1}",
                    nn.Sequential(BasicBlock3d(width, out, stride), BasicBlock3d(out, out, 1)))
            width = out
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.linear = nn.Linear(width, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            y = stage(y)
        return self.linear(torch.flatten(self.avgpool(y), 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--side", type=int, default=28)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--classes", type=int, default=11)
    parser.add_argument("--cuda", type=int, choices=(0, 1), default=0)
    parser.add_argument("--tf32", type=int, choices=(0, 1), default=0)
    args = parser.parse_args()

    device = torch.device("cuda:0" if args.cuda else "cpu")
    torch.backends.cudnn.benchmark = args.cuda == 1
    torch.backends.cudnn.allow_tf32 = args.tf32 == 1
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == 1
    torch.manual_seed(0)
    model = ResNet18For3d(1, args.classes).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs = torch.randn(args.batch, 1, args.side, args.side, args.side).to(device)
    target = torch.randint(0, args.classes, (args.batch,)).to(device)

    seconds = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = F.cross_entropy(model(inputs), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if args.cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            seconds.append(elapsed)

    median = statistics.median_high(seconds)
    print(json.dumps({
        "framework": f"pytorch {torch.__version__}",
        "device": str(device),
        "tf32": args.tf32 == 1,
        "batch": args.batch,
        "side": args.side,
        "parameters": sum(p.numel() for p in model.parameters()),
        "threads": torch.get_num_threads(),
        "step_s": [round(s, 4) for s in seconds],
        "median_s": round(median, 4),
        "samples_per_s": round(args.batch / median, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }))


if __name__ == "__main__":
    main()
