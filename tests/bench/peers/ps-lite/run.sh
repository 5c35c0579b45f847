#!/bin/bash
# Starts a ps-lite cluster on loopback running pslite_bench (README.md here):
#   run.sh SERVERS WORKERS VALUES_PER_KEY WINDOW_SECONDS SCHEDULER_PORT
# Each worker prints its pairs/s and goodput when its window ends.
set -u
export DMLC_NUM_SERVER=$1 DMLC_NUM_WORKER=$2 BENCH_VALUES=$3 BENCH_WINDOW=$4 BENCH_WARMUP=1
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$5 DMLC_INTERFACE=lo
bin="$(dirname "$0")/pslite_bench"
DMLC_ROLE=scheduler "$bin" &
for ((i = 0; i < $1; ++i)); do DMLC_ROLE=server "$bin" & done
for ((i = 0; i < $2; ++i)); do DMLC_ROLE=worker "$bin" & done
wait
