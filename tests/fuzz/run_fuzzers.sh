#!/usr/bin/env bash
# `make fuzz`: runs every libFuzzer harness built in BUILD (tests/fuzz/CMakeLists.txt) for
# SECONDS each, one after the other, and prints each one's executions and findings.
#
#   tests/fuzz/run_fuzzers.sh BUILD SECONDS
#
# Each fuzzer starts from its seed corpus (corpus/<name>/) and its regressions
# (regressions/<name>/), and grows a working corpus in BUILD/fuzz-corpus/<name>/ that later
# runs reuse. An input that makes a harness fail is written to BUILD/fuzz-crashes/; the
# script then exits 1 naming it. Fix the bug, then copy the input into regressions/<name>/
# so that fuzz.<name>.replay keeps it fixed (tests/fuzz/README.md).
set -uo pipefail
build=${1:?usage: run_fuzzers.sh BUILD SECONDS}
seconds=${2:?usage: run_fuzzers.sh BUILD SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
crashes="$build/fuzz-crashes"
mkdir -p "$crashes"
status=0
for binary in "$build"/bin/fuzz_*; do
  name=$(basename "$binary")
  name=${name#fuzz_}
  [[ "$name" == *_replay ]] && continue
  corpus="$build/fuzz-corpus/$name"
  mkdir -p "$corpus"
  log="$build/fuzz-$name.log"
  echo "fuzz_$name: ${seconds} s"
  # -rss_limit_mb bounds the memory any input may cost (a reader must not blow up on a
  # small file); -timeout flags an input that takes more than 10 s. One OpenMP thread:
  # the inputs are small, and idle worker threads would spin on the fuzzer's core.
  OMP_NUM_THREADS=1 "$binary" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$crashes/$name-" "$corpus" "$here/corpus/$name" "$here/regressions/$name" >"$log" 2>&1
  result=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  echo "fuzz_$name: ${runs:-?} executions, ${coverage:-cov: ?}, corpus $(ls "$corpus" | wc -l) inputs"
  if [[ $result -ne 0 ]]; then
    echo "fuzz_$name FAILED (exit $result); the input is in $crashes, the log in $log:"
    grep -E 'ERROR|fuzz_[a-z_]+:|Test unit written' "$log" | head -20
    status=1
  fi
done
exit $status
