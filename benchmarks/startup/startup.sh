#!/usr/bin/env bash
# How soon `radt-ext run` starts the workload on a GPU host, and how much later it returns:
#   the workload's start after `radt-ext run` (median of 5: 3 runs of a workload that ends at once, the
#   `sleep 5` run and the matmul run), `radt-ext run -l top -- sleep 5` against `sleep 5`, and README
#   command 1 (`radt-ext run -- python -m radt_ext.workloads.matmul --seconds 10`, every available
#   listener) wall time. benchmarks/startup/startup.py does the timing; ~40 s.
# Run from the repository root: RESULTS=<dir> [BUDGET_S=45] bash benchmarks/startup/startup.sh
# Writes $RESULTS/startup/startup.{json,md} and $RESULTS/startup.log. DRY=1: the same on the CPU with the
# NVML replay and a 1 s matmul (no GPU needed).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
RESULTS=${RESULTS:-/tmp/startup-results}
BUDGET_S=${BUDGET_S:-45}
MATMUL_S=10
gpu_dry h200_matmul.json && MATMUL_S=1
mkdir -p "$RESULTS/startup"
gpu_work "$(mktemp -d /tmp/radt-startup-XXXXXX)"  # its spool; the benchmark makes its own store there
unset MLFLOW_TRACKING_URI
gpu_machine "$RESULTS/startup/env.txt" name,driver_version
cat "$RESULTS/startup/env.txt"
echo "== startup at ${SECONDS}s (timeout $((BUDGET_S - 3))s)"
timeout -k 2 $((BUDGET_S - 3)) python3 -m benchmarks.startup.startup --out "$RESULTS/startup" --store "sqlite:///$W/mlflow.db" \
  --repeats 3 --sleep-s 5 --sleep-repeats 1 --matmul-s $MATMUL_S --no-matmul-alone --no-split --no-mlflow-import \
  > "$RESULTS/startup.log" 2>&1
rc=$?
grep "^startup: " "$RESULTS/startup.log"  # one timing line per step
echo "== startup exited $rc at ${SECONDS}s"
[ $rc -ne 0 ] && { echo "FAILED: benchmarks.startup.startup (exit $rc); its log:"; tail -n 30 "$RESULTS/startup.log"; }
cat "$RESULTS/startup/startup.md" 2>/dev/null || echo "FAILED: no startup.md written"
cp "$W/mlflow.db" "$RESULTS/startup/mlflow.db" 2>/dev/null
rm -rf "$W"
echo "== done at ${SECONDS}s"
