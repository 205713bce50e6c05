#!/usr/bin/env bash
# `make scale`: runs bench/scale.ts in a process group of its own, so that whatever becomes of it (it fails, it is
# killed), every process it started goes with it: the nodes, Redis, wsload's workers. Ctrl-C is passed on to it
# (it stops what it started, writes its results and restores the kernel settings it raised); once it has exited,
# anything left in its group is ended, and settings it could not restore (bench/.run/scale/sysctls.restore) are.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
restore_file=$root/bench/.run/scale/sysctls.restore

# Background jobs get a process group of their own: Ctrl-C at the terminal reaches this script, not the run's processes.
set -m
node --expose-gc --import ./bench/gc-preload.ts bench/scale.ts "$@" &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null' INT
trap 'kill -TERM "$pid" 2>/dev/null' TERM

status=0
while :; do
  wait "$pid"
  status=$?
  kill -0 "$pid" 2>/dev/null || break
done

if kill -0 -- -"$pid" 2>/dev/null; then
  echo "scale: ending what bench/scale.ts left running (process group $pid)" >&2
  kill -TERM -- -"$pid" 2>/dev/null
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- -"$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$pid" 2>/dev/null
fi
if [[ -f $restore_file ]]; then
  while read -r key value; do
    echo "scale: sysctl $key back to $value" >&2
    sysctl -q -w "$key=$value" >/dev/null || echo "scale: could not restore $key" >&2
  done <"$restore_file"
  rm -f "$restore_file"
fi
exit "$status"
