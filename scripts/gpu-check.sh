#!/usr/bin/env bash
# The whole GPU check in one run, on a GPU machine, from the programs that
# scripts/gpu-bundle.sh built and packed into .gpu-bundle/ on a development machine:
#
#   1. the test suite under ctest, one process per test as `make test` runs it: the GPU's
#      tests first, alone, then the rest beside compute-sanitizer's memcheck over every
#      CUDA suite and its racecheck over the kernels that use shared memory
#      (KILN_CUDA_NO_CACHING=1, so each block is its own cudaMalloc and memcheck sees its
#      bounds);
#   2. the CUDA benchmarks (each reports its fraction of the copy peak or of cuBLAS's rate
#      measured in the same run), alone on the GPU;
#   3. the 3D ResNet-18 training step beside PyTorch on the same GPU, and the demo;
#   4. (models) the bundled models' training steps (ResNet-18/50, DenseNet-121 plain and
#      memory-efficient) beside PyTorch's same networks: samples/s and peak memory;
#   5. (graphs, not in the default run: a lease of its own) issue 31's table: Kiln eager
#      and with CUDA graphs (--graphs 1, also with --channels-last 1) beside PyTorch eager
#      (contiguous and channels-last 3D, fused Adam) and torch.compile (default and
#      reduce-overhead), for ResNet-18 28^3 at batch 8 and 32, DenseNet-121 28^3 at 16 and
#      ResNet-50 64^3 at 8, in float32 with TF32 and in bfloat16 autocast; the cheap rows
#      first, the compiles last, each under its own limit and the phase under 9 minutes.
#
# Logs and a summary go to $OUT (default gpu-results/), at most 8 files, the summary table
# printed last. Every phase has a time limit, so the whole run ends inside 10 minutes
# (measured on an H200: tests and sanitizers 4 min, benchmarks 3, training step 1.5).
# The sanitizers' shards stop at their limit: memcheck over every CUDA test needs longer
# than one lease allows, so each run says how many tests finished under them.
#
# Usage: scripts/gpu-check.sh [phases]   (any of "tests cputests bench train demo models graphs";
#        default "tests bench train demo models"). "tests" runs the GPU's tests and the
#        sanitizers over SANITIZE_SUITES (default: every CUDA suite); "cputests" the rest of
#        the suite (CI runs it too, on every change).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/gpu-results}
PHASES=${1:-tests bench train demo models}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
has_phase() { [[ " $PHASES " == *" $1 "* ]]; }

# --- The programs, where ctest expects them ------------------------------------------------
# ctest's files name the build folder by the absolute path it had on the development
# machine; that path is made to lead here.
BUILD_ABS=$(cat .gpu-bundle/build_dir)
SOURCE_ABS=$(dirname "$BUILD_ABS")
if [ "$SOURCE_ABS" != "$REPO" ]; then
  if [ -e "$SOURCE_ABS" ]; then echo "gpu-check: $SOURCE_ABS exists and is not this checkout" >&2; exit 1; fi
  mkdir -p "$(dirname "$SOURCE_ABS")" && ln -s "$REPO" "$SOURCE_ABS"
fi
BUILD=$REPO/$(basename "$BUILD_ABS")
mkdir -p "$BUILD/bin"
tar -xf .gpu-bundle/ctest-files.tar -C "$BUILD"
# ... and call cmake by this machine's path.
HOST_CMAKE=$(grep -rhoE '"[^"]*/cmake"' "$BUILD" --include=CTestTestfile.cmake | head -1 | tr -d '"')
if [ -n "$HOST_CMAKE" ] && [ ! -x "$HOST_CMAKE" ]; then
  find "$BUILD" -name CTestTestfile.cmake -exec sed -i "s|\"$HOST_CMAKE\"|\"$(command -v cmake)\"|g" {} +
fi
for packed in .gpu-bundle/*.xz; do
  xz -dc "$packed" >"$BUILD/bin/$(basename "$packed" .xz)" &
done
wait
chmod +x "$BUILD"/bin/*
rm -rf "$BUILD/lib" && tar -C "$BUILD" -xJf .gpu-bundle/lib.tar.xz

# cuDNN, cuBLAS and NCCL from PyTorch's wheels (the machine has no system copies).
WHEEL_LIBS=$(python3 - <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
dirs = set()
for root in roots:
    for name in ("libcudnn.so.9", "libcublas.so.1*", "libnccl.so.2"):
        dirs.update(os.path.dirname(f) for f in glob.glob(os.path.join(root, "nvidia", "**", name), recursive=True))
print(":".join(sorted(dirs)))
PY
)
# Kiln's programs find the bundle's libraries first; Python keeps the machine's own.
PYTHON_LD_LIBRARY_PATH=$WHEEL_LIBS:${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$BUILD/lib:$PYTHON_LD_LIBRARY_PATH
python3() { LD_LIBRARY_PATH=$PYTHON_LD_LIBRARY_PATH command python3 "$@"; }
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)

{
  echo "commit $(cat .gpu-bundle/commit), uncommitted: $(wc -l <.gpu-bundle/uncommitted) files"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  nvcc --version 2>/dev/null | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuDNN', torch.backends.cudnn.version())"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "compute-sanitizer: ${SANITIZER:-none}"
  lscpu | grep -E "Model name|^CPU\(s\)"
  "$BUILD/bin/kiln" info
} >"$OUT/env.txt" 2>&1
note "== $(head -3 "$OUT/env.txt" | tail -1)"

# --- 1. Tests and sanitizers, side by side --------------------------------------------------
# (CublasLoader's tests need a process of their own: cuBLAS not yet loaded.)
CUDA_SUITES=${SANITIZE_SUITES:-'Cuda*:CudnnApi*:PinnedPool*'}
RACE_SUITES=${RACE_SUITES:-'CudaBatchNorm*:CudaMultiTensor*:CudaOptim*:CudaSoftmax*:CudaReduce*:CudaMatmul*:CudaPool*'}
sanitize() {  # tool shards shard filter [options]
  KILN_CUDA_NO_CACHING=1 GTEST_TOTAL_SHARDS=$2 GTEST_SHARD_INDEX=$3 timeout -s INT 180 stdbuf -oL \
    "$SANITIZER" --tool "$1" --error-exitcode 86 --print-limit 30 ${5:-} \
    "$BUILD/bin/kiln_tests" --gtest_filter="$4" >"$OUT/san_$1_$3.log" 2>&1
  echo "$1 shard $3/$2: exit $?" >>"$OUT/san_status.txt"
}
if has_phase tests; then
  start=$SECONDS
  : >"$OUT/san_status.txt"
  # The GPU's tests first, alone; then the sanitizers (slow: many shards) beside the rest of
  # the suite. The log is read line by line, so a run cut short still says what passed
  # and what failed.
  GPU_TESTS='Cuda|Cudnn|Cublas|Pinned|kiln_bench|kiln_train_step|kiln_cli'
  OMP_NUM_THREADS=2 timeout 100 ctest --test-dir "$BUILD" -j12 --timeout 90 --output-on-failure \
    -R "$GPU_TESTS" -E '^(fuzz|install)\.|marked_loops' >"$OUT/ctest.log" 2>&1
  note "ctest, GPU tests: exit $? at $((SECONDS - start)) s"
  if [ -n "$SANITIZER" ]; then
    # Tests that run out of memory on purpose make API errors: not reported (every call's
    # status is checked by Kiln itself).
    for shard in $(seq 0 9); do sanitize memcheck 10 "$shard" "$CUDA_SUITES" "--report-api-errors no" & done
    for shard in 0 1 2; do sanitize racecheck 3 "$shard" "$RACE_SUITES" & done
  fi
  if has_phase cputests; then
    OMP_NUM_THREADS=1 timeout 180 ctest --test-dir "$BUILD" -j3 --timeout 170 \
      --output-on-failure -E "$GPU_TESTS|^(fuzz|install)\.|marked_loops" >>"$OUT/ctest.log" 2>&1
    note "ctest, the rest: exit $? at $((SECONDS - start)) s"
  fi
  note "ctest: $(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$OUT/ctest.log") passed, \
$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception|Not Run)' "$OUT/ctest.log") failed"
  grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception|Not Run)' "$OUT/ctest.log" | head -40 |
    tee -a "$SUMMARY"
  note "skipped: $(grep -c '\*\*\*Skipped' "$OUT/ctest.log")"
  grep '\*\*\*Skipped' "$OUT/ctest.log" | sed 's/^.*Test *#[0-9]*: //; s/ \.*\*\*\*Skipped.*//' | head -20 | tee -a "$SUMMARY"
  wait
  note "sanitizers (${SANITIZER:-none}) done at $((SECONDS - start)) s:"
  sort "$OUT/san_status.txt" | tee -a "$SUMMARY"
  for log in "$OUT"/san_*_*.log; do
    echo "===== $log"
    cat "$log"
  done >"$OUT/sanitizers.log" 2>/dev/null
  rm -f "$OUT"/san_*_*.log "$OUT/san_status.txt"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|\[  FAILED  \]|\[  PASSED  \]" "$OUT/sanitizers.log" | sort | uniq -c |
    head -30 | tee -a "$SUMMARY"
  note "sanitizer errors at: $(grep -oE '(Invalid|Race|hazard|Uninitialized)[^|]*' "$OUT/sanitizers.log" | sort | uniq -c | head -10)"
  note "tests finished under the sanitizers: $(grep -c '^\[       OK \]' "$OUT/sanitizers.log") OK, $(grep -c '^\[  FAILED  \].*ms)' "$OUT/sanitizers.log") failed"
fi

# --- 2. Benchmarks, alone on the GPU -------------------------------------------------------
if has_phase bench; then
  start=$SECONDS
  # Google Benchmark runs cases in registration order, so each family group is its own run,
  # most wanted first (the targets: elementwise >= 90% of the copy peak; reductions,
  # softmax, batch-norm statistics >= 85%; fused Adam >= 85%), each with a time limit.
  bench_group() {  # seconds filter   (BENCH_ONLY=regex: only the groups whose filter matches)
    if [ -n "${BENCH_ONLY:-}" ] && ! [[ "$2" =~ $BENCH_ONLY ]]; then return; fi
    timeout -s INT "$1" stdbuf -oL "$BUILD/bin/kiln_bench" --benchmark_filter="$2" --benchmark_min_time=0.05 \
      --benchmark_counters_tabular=true >>"$OUT/bench.txt" 2>&1
    note "bench $2: exit $? at $((SECONDS - start)) s"
  }
  : >"$OUT/bench.txt"
  bench_group 30 'BM_Cuda(Copy_DeviceToDevice|Elementwise)'
  bench_group 60 'BM_Cuda(Sum|VarMean|Argmax|Softmax|BatchNorm)'  # BatchNorm includes the fused-tail ops
  bench_group 20 'BM_Cuda(Adam|Sgd|Unscale|GradNorm)'
  bench_group 20 'BM_CudaMatmul'
  bench_group 30 'BM_Cuda(Pool|Gather|IndexSelect|ScatterAdd|Rand|Copy_HostToDevice|Copy_DeviceToHost)'
  bench_group 40 'BM_CudaConv3d_Resnet18/.*/28/'
  note "bench: $(grep -c '^BM_' "$OUT/bench.txt") cases in $((SECONDS - start)) s"
fi

# --- 3. The training step beside PyTorch, and the demo -------------------------------------
if has_phase train; then
  start=$SECONDS
  for batch in 8 32; do
    for tf32 in 0 1; do
      timeout 25 "$BUILD/bin/kiln_train_step" --cuda 1 --tf32 $tf32 --batch $batch --steps 10 --warmup 3 2>&1
      timeout 25 env LD_LIBRARY_PATH="$PYTHON_LD_LIBRARY_PATH" python3 bench/train_step/train_step_pytorch.py --cuda 1 --tf32 $tf32 --batch $batch --steps 10 \
        --warmup 3 2>&1
    done
  done >"$OUT/train_step.jsonl"
  # Batch 64 at 28^3 through the DataLoader and DevicePrefetcher: copy_wait_s says whether
  # the GPU ever waited for a copy (Note [Copy waits]).
  timeout 40 "$BUILD/bin/kiln_train_step" --cuda 1 --tf32 1 --loader 1 --batch 64 --steps 20 --warmup 3 \
    >>"$OUT/train_step.jsonl" 2>&1
  note "through the loader: $(tail -1 "$OUT/train_step.jsonl" | grep -o '"median_s[^,]*\|"loader.*')"
  python3 - "$OUT/train_step.jsonl" <<'PY' | tee -a "$SUMMARY"
import json, sys
rows = {}
versions = set()
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        print("  ", line.rstrip()[:200]); continue
    key = (r["batch"], r.get("tf32"), r["framework"].split()[0])
    rows[key] = min(rows.get(key, 1e9), r["median_s"])
for batch, tf32 in sorted({(b, t) for b, t, _ in rows}):
    k, p = rows.get((batch, tf32, "kiln")), rows.get((batch, tf32, "pytorch"))
    ratio = f"{k / p:.2f}" if k and p else "-"
    print(f"train step b{batch} tf32 {tf32}: kiln {k} s, pytorch {p} s, kiln/pytorch {ratio}")
PY
fi
# --- 4. The bundled models beside PyTorch --------------------------------------------------
# Same networks (tests/nn/models/reference_models.py is PyTorch's), batch, float32 with TF32
# on both sides, cuDNN benchmark mode; samples/s and the device allocator's peak over the
# timed steps (Kiln's caching allocator, torch.cuda.max_memory_allocated).
if has_phase models; then
  start=$SECONDS
  : >"$OUT/models.jsonl"
  for config in "resnet18 28 32 0" "resnet18 64 8 0" "resnet50 64 8 0" "densenet121 28 16 0" "densenet121 28 16 1" \
      "densenet121 64 8 0" "densenet121 64 8 1"; do
    read -r model side batch efficient <<<"$config"
    args=(--cuda 1 --tf32 1 --model "$model" --side "$side" --batch "$batch" --memory-efficient "$efficient"
          --steps 5 --warmup 2)
    timeout 60 "$BUILD/bin/kiln_train_step" "${args[@]}" >>"$OUT/models.jsonl" 2>&1
    timeout 60 env LD_LIBRARY_PATH="$PYTHON_LD_LIBRARY_PATH" python3 bench/train_step/train_step_pytorch.py "${args[@]}" >>"$OUT/models.jsonl" 2>&1
  done
  note "models: $((SECONDS - start)) s"
  python3 - "$OUT/models.jsonl" <<'PY' | tee -a "$SUMMARY"
import json, sys
rows = {}
versions = set()
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        print("  ", line.rstrip()[:200]); continue
    key = (r["model"], r["side"], r["batch"], r["memory_efficient"])
    rows.setdefault(key, {})[r["framework"].split()[0]] = r
print("| model | side | batch | mem-eff | kiln samples/s | pytorch samples/s | kiln/pytorch time | kiln peak MB | pytorch peak MB |")
print("|---|---|---|---|---|---|---|---|---|")
for key, r in rows.items():
    k, p = r.get("kiln"), r.get("pytorch")
    ratio = f"{k['median_s'] / p['median_s']:.2f}" if k and p else "-"
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {k and k['samples_per_s']} | {p and p['samples_per_s']} | "
          f"{ratio} | {k and k['step_peak_allocated_mb']} | {p and p['step_peak_allocated_mb']} |")
PY
fi
# --- 5. CUDA graphs: Kiln eager and graphed beside PyTorch's best --------------------------
if has_phase graphs; then
  start=$SECONDS
  : >"$OUT/graphs.jsonl"
  CONFIGS=("resnet18 28 8" "resnet18 28 32" "densenet121 28 16" "resnet50 64 8")
  graph_run() {  # limit program args...: one JSON line into graphs.jsonl, unless the phase is out of time
    local limit=$1
    shift
    if ((SECONDS - start + limit > 540)); then
      note "graphs: no time left for $*"
      return
    fi
    timeout "$limit" "$@" >>"$OUT/graphs.jsonl" 2>>"$OUT/graphs.err"
  }
  for precision in "--tf32 1 --bf16 0" "--tf32 1 --bf16 1"; do
    for config in "${CONFIGS[@]}"; do
      read -r model side batch <<<"$config"
      # shellcheck disable=SC2206
      args=(--cuda 1 $precision --model "$model" --side "$side" --batch "$batch" --steps 20 --warmup 5)
      graph_run 60 "$BUILD/bin/kiln_train_step" "${args[@]}" --graphs 0 --speed-of-light 1
      graph_run 40 "$BUILD/bin/kiln_train_step" "${args[@]}" --graphs 1
      graph_run 40 "$BUILD/bin/kiln_train_step" "${args[@]}" --graphs 1 --channels-last 1
      graph_run 40 python3 bench/train_step/train_step_pytorch.py "${args[@]}" --fused 1
      graph_run 40 python3 bench/train_step/train_step_pytorch.py "${args[@]}" --fused 1 --channels-last 1
    done
  done
  for precision in "--tf32 1 --bf16 0" "--tf32 1 --bf16 1"; do
    for config in "${CONFIGS[@]}"; do
      read -r model side batch <<<"$config"
      # shellcheck disable=SC2206
      args=(--cuda 1 $precision --model "$model" --side "$side" --batch "$batch" --steps 20 --warmup 5 --fused 1)
      graph_run 120 python3 bench/train_step/train_step_pytorch.py "${args[@]}" --compile default
      graph_run 120 python3 bench/train_step/train_step_pytorch.py "${args[@]}" --compile reduce-overhead
    done
  done
  note "graphs: $((SECONDS - start)) s"
  python3 - "$OUT/graphs.jsonl" <<'PY' | tee -a "$SUMMARY"
import json, sys
rows = {}
versions = set()
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    kind = r["framework"].split()[0]
    if kind == "kiln":
        variant = "kiln graphs" if r.get("graphs") else "kiln eager"
    elif r.get("compile", "none") != "none":
        variant = "compile " + r["compile"]
    else:
        variant = "pytorch channels-last" if r.get("channels_last") else "pytorch eager"
    key = (r["model"], r["side"], r["batch"], "bf16" if r.get("bf16") else "tf32")
    rows.setdefault(key, {})[variant] = r["median_s"]
    versions.add(r["framework"] + (f", cuDNN {r['cudnn']}" if r.get("cudnn") else ""))
    light = r.get("speed_of_light")
    if light:  # Note [A step's speed of light] in core/cudnn.h
        rows[key]["speed of light"] = light["s"] if light.get("complete") else None
variants = ["kiln eager", "kiln graphs", "pytorch eager", "pytorch channels-last", "compile default",
            "compile reduce-overhead"]
print("| model | side | batch | precision | " + " | ".join(v + " ms" for v in variants) +
      " | speed of light ms | graphs / kiln eager | graphs / best pytorch eager | graphs / best compile |"
      " graphs / speed of light |")
print("|---" * (4 + len(variants) + 5) + "|")
for key, r in rows.items():
    ms = [f"{r[v] * 1e3:.2f}" if v in r else "-" for v in variants]
    ms.append(f"{r['speed of light'] * 1e3:.2f}" if r.get("speed of light") else "-")
    g = r.get("kiln graphs")
    def ratio(others):
        found = [r[o] for o in others if r.get(o)]
        return f"{g / min(found):.2f}" if g and found else "-"
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(ms) + " | " +
          " | ".join([ratio(["kiln eager"]), ratio(["pytorch eager", "pytorch channels-last"]),
                      ratio(["compile default", "compile reduce-overhead"]), ratio(["speed of light"])]) + " |")
print()
print("Versions: " + "; ".join(sorted(versions)))
PY
fi
if has_phase demo; then
  start=$SECONDS
  timeout 45 "$BUILD/bin/train_cnn3d" >"$OUT/demo.log" 2>&1
  note "demo: exit $? in $((SECONDS - start)) s; $(tail -2 "$OUT/demo.log" | tr '\n' ' ')"
fi

echo
echo "================ summary ================"
cat "$SUMMARY"
if has_phase bench; then
  echo "---- benchmarks ----"
  grep -E '^(BM_|Benchmark)' "$OUT/bench.txt" | grep -v Conv3d | tr -s ' ' | cut -c1-120 | head -110
fi
