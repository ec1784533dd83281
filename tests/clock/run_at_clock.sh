#!/usr/bin/env bash
# Runs a test binary with the monotonic clock (std::chrono::steady_clock) reading SECONDS,
# in a time namespace (unshare -T, Linux 5.6+), so that code which throttles or times
# with that clock is tested as on a machine booted SECONDS ago (Note [Never, not the
# clock's zero] in core/throttle.h). Usage:
#   run_at_clock.sh SECONDS BINARY ARGS...
# KILN_EXPECT_MONOTONIC_S tells the binary what its clock should read (the test
# ClockNamespace.TheClockReadsWhatTheScriptSet checks it). Exits 77 (ctest's skip code
# here) with the reason when this machine does not allow time namespaces.
set -euo pipefail
target=$1
shift
if ! command -v unshare > /dev/null; then
  echo "skipped: unshare (util-linux) is not installed"
  exit 77
fi
if ! why=$(unshare -T --fork --monotonic=0 true 2>&1); then
  echo "skipped: this machine does not allow a time namespace here (unshare -T: ${why:-refused}; it needs CAP_SYS_ADMIN and Linux 5.6+)"
  exit 77
fi
# The offset moves the clock from its reading now (seconds since boot; /proc/uptime's
# first field, which equals the monotonic clock on a machine that has not been suspended)
# to the target. The kernel refuses an offset that would make the clock negative.
read -r uptime _ < /proc/uptime
offset=$((target - ${uptime%.*}))
export KILN_EXPECT_MONOTONIC_S=$target
echo "running $(basename "$1") with the monotonic clock at ${target} s (offset ${offset} s from ${uptime} s)"
exec unshare -T --fork --monotonic="$offset" "$@"
