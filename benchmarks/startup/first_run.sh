#!/usr/bin/env bash
# README command 1 on a fresh store, on a GPU host: how long beyond its 10 s load it takes, and where the
# time goes (radt-ext's import, the store's creation alongside the workload, the workload's imports, torch
# and CUDA start, the end: listeners, summaries, timelines, report, view). benchmarks/first_run.py runs
# `python3 -m radt_ext.cli run --run-name first -- python3 -m radt_ext.workloads.matmul --seconds 10`
# 3 times, each in a fresh directory with no store (HOME and RADT_EXT_SPOOL_DIR inside it), every
# available listener. Reads the GPU only; never changes MIG, clocks or limits.
# Run from the repository root: RESULTS=<dir> bash scripts/gpu/first_run.sh
# Expected wall time: ~75 s (3 × ~20 s, plus the versions). Writes $RESULTS/first_run/first_run.{json,md},
# $RESULTS/first_run.log and $RESULTS/first_run/env.txt.
# DRY=1: the same flow on the CPU with the NVML replay backend and a 2 s load (no GPU needed).
set -u
export PYTHONUNBUFFERED=1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
RESULTS=${RESULTS:-/tmp/first-run-results}
SECONDS_LOAD=10
REPEATS=${REPEATS:-3}
if [ "${DRY:-0}" = 1 ]; then
  export RADT_EXT_NVML_REPLAY=${RADT_EXT_NVML_REPLAY:-$PWD/listeners/traces/h200_matmul.json}
  SECONDS_LOAD=2
fi
unset MLFLOW_TRACKING_URI MLFLOW_EXPERIMENT_NAME MLFLOW_EXPERIMENT_ID MLFLOW_RUN_ID RADT_EXT_ACTIVE
mkdir -p "$RESULTS/first_run"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 2; echo "cpus $(nproc)"; uptime
  python3 --version; python3 -c "import mlflow, sys; print('mlflow', mlflow.__version__)" 2>&1 | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tail -1
} > "$RESULTS/first_run/env.txt"
cat "$RESULTS/first_run/env.txt"
echo "== first_run at ${SECONDS}s: $REPEATS runs of a ${SECONDS_LOAD}s load"
timeout -k 5 300 python3 -m benchmarks.first_run --out "$RESULTS/first_run" --repeats "$REPEATS" \
  --seconds "$SECONDS_LOAD" --label "${LABEL:-now}" > "$RESULTS/first_run.log" 2>&1
rc=$?
grep "^first_run: " "$RESULTS/first_run.log"  # one line per run
[ $rc -ne 0 ] && { echo "FAILED: benchmarks.first_run (exit $rc); its log:"; tail -n 30 "$RESULTS/first_run.log"; }
cat "$RESULTS/first_run/first_run.md" 2>/dev/null || echo "FAILED: no first_run.md written"
echo "== done at ${SECONDS}s"
