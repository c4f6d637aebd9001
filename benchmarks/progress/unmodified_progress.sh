#!/usr/bin/env bash
# The work of unmodified scripts on a GPU: what radt-ext counts in them, and what counting costs them
# (run from the repository root):
#   RESULTS=<dir> bash benchmarks/progress/unmodified_progress.sh
# 1. `radt-ext run` (default listeners) of two scripts that import nothing of radt-ext and log nothing:
#    benchmarks/progress/unmodified/loader_train.py (a small CNN trained for 3 epochs of 8192 samples over a
#    DataLoader with 2 workers, bf16) and benchmarks/progress/unmodified/infer_loop.py (a small CNN called on
#    batches of 8, bf16, 8 s); figures.md puts radt-ext's figures beside the scripts' own timings.
# 2. benchmarks.progress.progress_cost for both workloads: the hooks on and off in paired windows of one process
#    (CYCLE_S of cycles each).
# COST_ONLY=1: part 2 only. Reads the GPU only; never changes MIG, clocks or limits. Expected wall time:
# ~5 min (~4 min with COST_ONLY=1).
# DRY=1: the same flow on the CPU with the NVML replay backend, tiny sizes (~3 min on 2 cores).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
TRAIN="--epochs 3 --samples 8192 --batch 64 --workers 2"
INFER="--seconds 8 --batch 8"
CYCLE_S=${CYCLE_S:-90}
COST="--window 0.1 --settle 0.02"  # short windows: the host's drift over seconds cancels within a pair
if gpu_dry h200_matmul.json; then
  TRAIN="--device cpu --epochs 3 --samples 256 --batch 32 --workers 2 --work 1"
  INFER="--device cpu --seconds 2 --batch 8"
  CYCLE_S=${DRY_CYCLE_S:-8}
  COST="--window 0.2 --settle 0.05 --warmup 1 --device cpu --batch 16 --host-blocks 40"
fi
gpu_results "${RESULTS:-/tmp/unmodified-progress-results}" log.txt
gpu_work "$(mktemp -d /tmp/unmodified-progress.XXXXXX)"  # its spool and HOME; the store goes with the results
export MLFLOW_TRACKING_URI="sqlite:///$RESULTS/mlflow.db" HOME="$W/home"
unset RADT_EXT_NO_PROGRESS
gpu_machine "$RESULTS/machine.txt" index,name,memory.total,driver_version,mig.mode.current
say "machine: $(sed -n 2p "$RESULTS/machine.txt")"

JOBS=("loader_train $TRAIN" "infer_loop $INFER")
[ "${COST_ONLY:-0}" = 1 ] && JOBS=()
for job in "${JOBS[@]}"; do
  set -- $job
  name=$1; shift
  say "run: $name $*"
  python3 -m radt_ext.cli run --experiment-name unmodified --run-name "$name" -- \
    python3 "$REPO/benchmarks/progress/unmodified/$name.py" "$@" > "$RESULTS/$name.log" 2>&1
  say "$name exited $?: $(tail -1 "$RESULTS/$name.log")"
done
[ "${COST_ONLY:-0}" = 1 ] || python3 benchmarks/progress/unmodified_progress_figures.py "$RESULTS" | tee "$RESULTS/figures.md"

for workload in infer loader; do
  say "cost: $workload, $CYCLE_S s of cycles"
  python3 -m benchmarks.progress.progress_cost --workload "$workload" --budget-s "$CYCLE_S" $COST --out "$RESULTS" \
    > "$RESULTS/progress_cost_$workload.log" 2>&1
  say "cost $workload exited $?"
done
echo "==== ${SECONDS}s"; cat "$RESULTS/log.txt"; cat "$RESULTS"/progress_cost_*.md
