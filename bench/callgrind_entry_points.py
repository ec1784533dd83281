#!/usr/bin/env python3
"""Instructions per call of the CPU backend's entry points, counted by callgrind.

Wall time on a shared machine is noise; the instruction count (callgrind's Ir) of a
kernel call is deterministic, so two builds (before and after a refactor) compare
exactly. For each case below this runs one benchmark of kiln_bench under valgrind with
collection switched on only inside `kiln::cpu::CpuBackend::<entry>` and reports the
inclusive Ir of the calls into that entry point divided by their number:

    bench/callgrind_entry_points.py build-cpu/bin/kiln_bench > after.tsv
    bench/callgrind_entry_points.py --compare before.tsv after.tsv   # a Markdown table

One OpenMP thread (the count is then the work itself, not the thread team's spinning).
bench/results/2026-11-25-cpu-refactor-callgrind.md says how its numbers were made.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# (entry point of kiln::cpu::CpuBackend, benchmark name); float32 unless named.
CASES = [
    ("unary", "BM_Unary_Exp/1048576"),
    ("binary", "BM_Binary_Add/1048576"),
    ("binary", "BM_Broadcast_AddRow/1048576"),
    ("copy", "BM_Strided_TransposedCopy/1048576"),
    ("copy", "BM_Copy_Contiguous/1048576"),
    ("reduce", "BM_Sum_LastDim/1048576"),
    ("reduce", "BM_Sum_FirstDim/1048576"),
    ("var_mean", "BM_Var_LastDim/1048576"),
    ("softmax", "BM_Softmax_LastDim/1048576"),
    ("bmm", "BM_Matmul_Square<DType::Float32>/256"),
    ("bmm", "BM_Matmul_Square<DType::Float64>/256"),
    ("bmm", "BM_Matmul_TransposedRhs_F32/256"),
    ("batch_norm_stats", "BM_BatchNormStats/8/256/8"),
    ("batch_norm_apply", "BM_BatchNormApply/8/256/8"),
    ("batch_norm_backward_reduce", "BM_BatchNormBackwardReduce/8/256/8"),
    ("batch_norm_backward_input", "BM_BatchNormBackwardInput/8/256/8"),
    ("max_pool_forward", "BM_PoolForward/0/1"),
    ("avg_pool_forward", "BM_PoolForward/1/1"),
    ("adaptive_avg_pool_forward", "BM_PoolForward/2/1"),
    ("max_pool_backward", "BM_PoolBackward/0/1"),
    ("avg_pool_backward", "BM_PoolBackward/1/1"),
    ("adaptive_avg_pool_backward", "BM_PoolBackward/2/1"),
    ("conv_forward", "BM_Conv3d<ConvPass::Forward>/2"),
    ("conv_backward_input", "BM_Conv3d<ConvPass::BackwardInput>/2"),
    ("conv_backward_weight", "BM_Conv3d<ConvPass::BackwardWeight>/2"),
    ("sgd_step", "BM_Sgd_Momentum_ResNet3d50"),
    ("sgd_step", "BM_Sgd_Nesterov_ResNet3d50"),
    ("adam_step", "BM_Adam_Fused_ResNet3d50"),
    ("rmsprop_step", "BM_Rmsprop_Centered_ResNet3d50"),
    ("rmsprop_step", "BM_Rmsprop_Momentum_ResNet3d50"),
    ("multi_tensor_scale", "BM_Scale_UnscaleAndCheck_ResNet3d50"),
    ("multi_tensor_norm", "BM_Norm_ResNet3d50"),
]

ENTRY_PREFIX = "kiln::cpu::CpuBackend::"


def benchmark_filter(name):
    """A --benchmark_filter that selects exactly `name` (and its /real_time-like suffixes)."""
    return "^" + re.sub(r"([.\[\](){}*+?|^$\\])", r"\\\1", name) + "(/|$)"


def calls_into(callgrind_out, entry):
    """(number of calls, inclusive Ir of those calls) over every call arc into `entry`."""
    names = {}  # callgrind's name compression: "(id) name" once, "(id)" afterwards
    callee = None
    pending_calls = None
    calls = ir = 0
    with open(callgrind_out) as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                key, _, spec = line.rstrip("\n").partition("=")
                match = re.match(r"\((\d+)\)(?: (.*))?$", spec)
                if match:
                    if match.group(2) is not None:
                        names[match.group(1)] = match.group(2)
                    name = names[match.group(1)]
                else:
                    name = spec
                if key == "cfn":
                    callee = name
            elif line.startswith("calls="):
                pending_calls = int(line.split()[0][len("calls="):])
            elif pending_calls is not None:  # the cost line of that call arc: position [Ir]
                if callee.startswith(ENTRY_PREFIX + entry + "("):
                    costs = line.split()[1:]
                    calls += pending_calls
                    ir += int(costs[0]) if costs else 0
                pending_calls = None
    return calls, ir


def measure(bench, entry, name, workdir):
    out = os.path.join(workdir, "callgrind.out")
    command = ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out}",
               f"--toggle-collect={ENTRY_PREFIX}{entry}(*", bench,
               f"--benchmark_filter={benchmark_filter(name)}", "--benchmark_min_time=0.01"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    calls, ir = calls_into(out, entry)
    if calls == 0:
        sys.exit(f"{name}: no call into {ENTRY_PREFIX}{entry} was recorded")
    return calls, ir


def run(bench, only):
    with tempfile.TemporaryDirectory() as workdir:
        for entry, name in CASES:
            if only and not re.search(only, name):
                continue
            calls, ir = measure(bench, entry, name, workdir)
            print(f"{entry}\t{name}\t{calls}\t{ir}\t{round(ir / calls)}", flush=True)


def read_tsv(path):
    rows = {}
    with open(path) as f:
        for line in f:
            entry, name, calls, _, per_call = line.rstrip("\n").split("\t")
            rows[(entry, name)] = (int(calls), int(per_call))
    return rows


def compare(before_path, after_path):
    before, after = read_tsv(before_path), read_tsv(after_path)
    print("| entry point (`CpuBackend::`) | case | Ir/call before | Ir/call after | change |")
    print("|---|---|---|---|---|")
    for key in [k for k in ((e, n) for e, n in CASES) if k in before and k in after]:
        (calls_b, b), (calls_a, a) = before[key], after[key]
        note = f" ({calls_b} calls before, {calls_a} after)" if calls_b != calls_a else ""
        print(f"| `{key[0]}` | `{key[1]}`{note} | {b:,} | {a:,} | {100.0 * (a - b) / b:+.3f}% |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", nargs="?", help="the kiln_bench binary to measure")
    parser.add_argument("--only", help="measure only the cases whose name matches this regex")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="two outputs of this script")
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
    elif args.bench:
        run(args.bench, args.only)
    else:
        parser.error("give a kiln_bench binary, or --compare BEFORE AFTER")


if __name__ == "__main__":
    main()
