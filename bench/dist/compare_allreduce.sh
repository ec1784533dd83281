#!/usr/bin/env bash
# All-reduce bus bandwidth, Kiln's ring beside Open MPI's MPI_Allreduce on this machine,
# 2 and 4 ranks, 4 KB to 256 MB (kiln_allreduce_bench and kiln_mpi_allreduce_bench measure
# the same way). Open MPI runs twice: over TCP on the loopback interface (the same
# transport as Kiln's ring: the fair comparison) and with its defaults (shared memory
# between processes of one machine). Each configuration runs REPEATS times and the best
# busbw per size is kept (the machine's other load only ever slows a run down). Prints a
# markdown table: busbw in GB/s.
#   bench/dist/compare_allreduce.sh build [REPEATS]
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
bin=$build/bin
for tool in kiln kiln_allreduce_bench kiln_mpi_allreduce_bench; do
  [[ -x $bin/$tool ]] || { echo "missing $bin/$tool (make bench-dist builds it)" >&2; exit 1; }
done
command -v mpirun > /dev/null || { echo "mpirun not found (make bench-dist installs Open MPI)" >&2; exit 1; }
root=()
[[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# best FILE...: per size, the highest busbw (4th column) over the runs.
best() { cat "$@" | sed 's/^\[rank 0\] //' | grep -v '^#' | sort -k1,1n -k4,4gr | awk '!seen[$1]++ {print $1, $4}'; }

for ranks in 2 4; do
  for ((i = 0; i < repeats; i++)); do
    "$bin/kiln" launch --nproc-per-node "$ranks" --master-port $((29650 + i)) -- "$bin/kiln_allreduce_bench" \
      | grep '^\[rank 0\] [0-9]' > "$work/kiln.$ranks.$i"
    mpirun "${root[@]}" --oversubscribe --bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo -np "$ranks" \
      "$bin/kiln_mpi_allreduce_bench" | grep '^[0-9]' > "$work/tcp.$ranks.$i"
    mpirun "${root[@]}" --oversubscribe --bind-to none -np "$ranks" "$bin/kiln_mpi_allreduce_bench" \
      | grep '^[0-9]' > "$work/shm.$ranks.$i"
  done
  best "$work"/kiln."$ranks".* > "$work/kiln.$ranks"
  best "$work"/tcp."$ranks".* > "$work/tcp.$ranks"
  best "$work"/shm."$ranks".* > "$work/shm.$ranks"
  echo
  echo "### $ranks ranks"
  echo
  echo "| bytes | Kiln ring (TCP) | Open MPI (TCP) | Kiln / Open MPI TCP | Open MPI (shared memory) |"
  echo "|---|---|---|---|---|"
  join "$work/kiln.$ranks" "$work/tcp.$ranks" | join - "$work/shm.$ranks" \
    | awk '{printf "| %d | %.2f | %.2f | %.2f | %.2f |\n", $1, $2, $3, $2 / $3, $4}'
done
