#!/usr/bin/env bash
# Why a network's rounds disagree on one GPU: networks measured round after round, metered as the profiler
# does, timed only, and after idle gaps (benchmarks.ops.ops_spread).
# Run from the repository root: OUT=<dir> bash benchmarks/ops/network_round_spread.sh
#   (SPREAD_ARGS: other options, e.g. --configs resnet50:256:bf16:training --rounds 4)
# Writes $OUT/network_round_spread.tar.gz. DRY=1 (or DRY=<trace.json>): a tiny run on the CPU, without a GPU.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
: "${OUT:?set OUT to the output directory}"
SPREAD_ARGS=${SPREAD_ARGS:---rounds 6}
if gpu_dry h200_matmul.json; then SPREAD_ARGS="--rounds 2 --configs mlp:8:fp32:training --device cpu --window 0.02"; fi
gpu_work /tmp/network_round_spread
gpu_machine $W/env.txt name,driver_version,power.limit,clocks.sm,pstate
part -t 22 ops_spread 200 python3 -m benchmarks.ops.ops_spread $SPREAD_ARGS --out $W/ops_spread
tar -czf $OUT/network_round_spread.tar.gz -C $W --exclude mlflow.db --exclude spool . && ls -la $OUT
echo "== done at ${SECONDS}s"
