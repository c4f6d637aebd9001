#!/usr/bin/env bash
# README command 1 on a fresh store, on a GPU host: how long beyond its 10 s load it takes, and where the
# time goes (radt-ext's import, the store's creation alongside the workload, the workload's imports, torch
# and CUDA start, the end: listeners, summaries, timelines, report, view). benchmarks/startup/first_run.py runs
# `python3 -m radt_ext.cli run --run-name first -- python3 -m radt_ext.workloads.matmul --seconds 10`
# 3 times, each in a fresh directory with no store (HOME and RADT_EXT_SPOOL_DIR inside it), every
# available listener. Reads the GPU only; never changes MIG, clocks or limits.
# Run from the repository root: RESULTS=<dir> bash benchmarks/startup/first_run.sh
# Expected wall time: ~75 s (3 × ~20 s, plus the versions). Writes $RESULTS/first_run/first_run.{json,md},
# $RESULTS/first_run.log and $RESULTS/first_run/env.txt.
# DRY=1: the same flow on the CPU with the NVML replay backend and a 2 s load (no GPU needed).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
RESULTS=${RESULTS:-/tmp/first-run-results}
SECONDS_LOAD=10
REPEATS=${REPEATS:-3}
gpu_dry h200_matmul.json && SECONDS_LOAD=2
unset MLFLOW_TRACKING_URI MLFLOW_EXPERIMENT_NAME MLFLOW_EXPERIMENT_ID MLFLOW_RUN_ID RADT_EXT_ACTIVE  # a fresh store
mkdir -p "$RESULTS/first_run"
gpu_machine "$RESULTS/first_run/env.txt" name,driver_version
cat "$RESULTS/first_run/env.txt"
echo "== first_run at ${SECONDS}s: $REPEATS runs of a ${SECONDS_LOAD}s load"
timeout -k 5 300 python3 -m benchmarks.startup.first_run --out "$RESULTS/first_run" --repeats "$REPEATS" \
  --seconds "$SECONDS_LOAD" --label "${LABEL:-now}" > "$RESULTS/first_run.log" 2>&1
rc=$?
grep "^first_run: " "$RESULTS/first_run.log"  # one line per run
[ $rc -ne 0 ] && { echo "FAILED: benchmarks.startup.first_run (exit $rc); its log:"; tail -n 30 "$RESULTS/first_run.log"; }
cat "$RESULTS/first_run/first_run.md" 2>/dev/null || echo "FAILED: no first_run.md written"
echo "== done at ${SECONDS}s"
