#!/bin/bash
# One side-by-side series (README.md here): for 1 x 1 and 2 x 2 at 1 MB and
# 16 MB, ps-lite over TCP and over ipc:// (DMLC_LOCAL=1), then twinps over
# TCP, the Unix socket and shared memory, one after another. Expects
# ./pslite_bench and ./twinps beside it; prints each worker's goodput.
#   series.sh [WINDOW_SECONDS (2)] [FIRST_SCHEDULER_PORT (9300)]
set -u
here="$(dirname "$0")"
window=${1:-2}
port=${2:-9300}
for cluster in "1 1" "2 2"; do
  for values in 262144 4194304; do
    set -- $cluster
    echo "=== servers $1 workers $2 values $values"
    port=$((port + 1))
    echo "-- ps-lite tcp"
    timeout 60 "$here/run.sh" "$1" "$2" "$values" "$window" "$port" 2>&1 | grep worker
    port=$((port + 1))
    echo "-- ps-lite ipc"
    DMLC_LOCAL=1 timeout 60 "$here/run.sh" "$1" "$2" "$values" "$window" "$port" 2>&1 | grep worker
    for plane in tcp-only tcp-unix tcp; do
      echo "-- twinps $plane"
      timeout 120 "$here/twinps" bench ps --servers "$1" --workers "$2" --values-per-key "$values" \
        --mode push-then-pull --optimizer none --repeats 2 --window "$window" --warmup 1 --data-plane "$plane" 2>&1 |
        grep "goodput"
    done
  done
done
