#!/usr/bin/env bash
# The work of unmodified scripts on a GPU: what radt-ext counts in them, and what counting costs them
# (run from the repository root):
#   RESULTS=<dir> bash scripts/gpu/unmodified_progress.sh
# 1. `radt-ext run` (default listeners) of two scripts that import nothing of radt-ext and log nothing:
#    benchmarks/unmodified/loader_train.py (a small CNN trained for 3 epochs of 8192 samples over a
#    DataLoader with 2 workers, bf16) and benchmarks/unmodified/infer_loop.py (a small CNN called on
#    batches of 8, bf16, 8 s); figures.md puts radt-ext's figures beside the scripts' own timings.
# 2. benchmarks.progress_cost for both workloads: the hooks on and off in paired windows of one process
#    (CYCLE_S of cycles each).
# COST_ONLY=1: part 2 only. Reads the GPU only; never changes MIG, clocks or limits. Expected wall time:
# ~5 min (~4 min with COST_ONLY=1).
# DRY=1: the same flow on the CPU with the NVML replay backend, tiny sizes (~3 min on 2 cores).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
REPO=$PWD
DRY=${DRY:-0}
RESULTS=${RESULTS:-/tmp/unmodified-progress-results}
W=$(mktemp -d /tmp/unmodified-progress.XXXXXX)
mkdir -p "$RESULTS"
export MLFLOW_TRACKING_URI="sqlite:///$RESULTS/mlflow.db" RADT_EXT_SPOOL_DIR="$W/spool" HOME="$W/home"
unset MLFLOW_RUN_ID MLFLOW_EXPERIMENT_ID MLFLOW_EXPERIMENT_NAME RADT_EXT_ACTIVE RADT_EXT_NO_PROGRESS
say() { echo "[$SECONDS s] $*" | tee -a "$RESULTS/log.txt"; }
: > "$RESULTS/log.txt"
TRAIN="--epochs 3 --samples 8192 --batch 64 --workers 2"
INFER="--seconds 8 --batch 8"
CYCLE_S=${CYCLE_S:-90}
COST="--window 0.1 --settle 0.02"  # short windows: the host's drift over seconds cancels within a pair
if [ "$DRY" = 1 ]; then
  export RADT_EXT_NVML_REPLAY=${RADT_EXT_NVML_REPLAY:-$REPO/listeners/traces/h200_matmul.json}
  TRAIN="--device cpu --epochs 3 --samples 256 --batch 32 --workers 2 --work 1"
  INFER="--device cpu --seconds 2 --batch 8"
  CYCLE_S=${DRY_CYCLE_S:-8}
  COST="--window 0.2 --settle 0.05 --warmup 1 --device cpu --batch 16 --host-blocks 40"
fi
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version,mig.mode.current --format=csv 2>&1
  nproc; python3 -c "import torch, mlflow; print('torch', torch.__version__, 'mlflow', mlflow.__version__)"; } \
  > "$RESULTS/machine.txt" 2>&1
say "machine: $(sed -n 2p "$RESULTS/machine.txt")"

JOBS=("loader_train $TRAIN" "infer_loop $INFER")
[ "${COST_ONLY:-0}" = 1 ] && JOBS=()
for job in "${JOBS[@]}"; do
  set -- $job
  name=$1; shift
  say "run: $name $*"
  python3 -m radt_ext.cli run --experiment-name unmodified --run-name "$name" -- \
    python3 "$REPO/benchmarks/unmodified/$name.py" "$@" > "$RESULTS/$name.log" 2>&1
  say "$name exited $?: $(tail -1 "$RESULTS/$name.log")"
done
[ "${COST_ONLY:-0}" = 1 ] || python3 scripts/gpu/unmodified_progress_figures.py "$RESULTS" | tee "$RESULTS/figures.md"

for workload in infer loader; do
  say "cost: $workload, $CYCLE_S s of cycles"
  python3 -m benchmarks.progress_cost --workload "$workload" --budget-s "$CYCLE_S" $COST --out "$RESULTS" \
    > "$RESULTS/progress_cost_$workload.log" 2>&1
  say "cost $workload exited $?"
done
echo "==== ${SECONDS}s"; cat "$RESULTS/log.txt"; cat "$RESULTS"/progress_cost_*.md
