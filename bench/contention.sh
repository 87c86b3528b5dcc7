#!/bin/bash
# Issue 21: does running both cores inflate a command's CPU time (what a two-executor
# cluster job does)? CPU of one local-engine command alone, then of two of the same at once.
# Usage: bench/contention.sh STORE [RMQSTORE]   (e.g. the store bench_cluster.py --file-mb 1024 left)
set -euo pipefail
S=$1; R=${2:-rmqstore}; T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
t() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1+$2}'; }
for cmd in export verify; do
  a1=(); a2=()
  if [ "$cmd" = export ]; then a1=(--output "$T/x1" --overwrite); a2=(--output "$T/x2" --overwrite); fi
  for r in 1 2; do
    one=$(t "$R" "$cmd" --store "$S" "${a1[@]}" --format json)
    t "$R" "$cmd" --store "$S" "${a1[@]}" --format json > "$T/c1" &
    t "$R" "$cmd" --store "$S" "${a2[@]}" --format json > "$T/c2"; wait
    echo "$cmd alone ${one}s CPU; two at once $(cat "$T/c1")s + $(cat "$T/c2")s CPU"
  done
done
