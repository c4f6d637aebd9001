#!/usr/bin/env bash
# Proof that summaries over the active phase measure the work, not the start-up (run from the repository root):
#   RESULTS=<dir> BUDGET_S=120 bash benchmarks/progress/active_phase.sh
# One sweep (python3 -m radt_ext.cli sweep, parent listeners nvml+gpm, children top+gpu_procs) of the cnn_amp
# recipe's training entry (ResNet-18, synthetic32, 3 epochs of 32768 samples, bf16): batch sizes 256 and 512
# alone (exclusive), then two identical bs-256 trainings collocated naively (their slowdown is measured
# against the bs-256 exclusive run, found by the sweep). Then active_phase_figures.py compares the
# active-phase throughput ratio and the collocated slowdown with the recipe's own per-epoch samples/s.
# Writes $RESULTS/active_phase_figures.{md,json}, the sweep's log, machine.txt and the SQLite store
# (mlflow.db.xz, when small).
# Reads the GPU only; never changes MIG, clocks or limits.
# DRY=1: the same flow on the CPU with the replay backend and a tiny fp32 training (proves arguments and paths).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
BUDGET_S=${BUDGET_S:-120}
gpu_results "${RESULTS:-/tmp/active-phase-results}" log.txt
rm -f "$RESULTS"/active_phase_figures.*
gpu_work "$(mktemp -d /tmp/active-phase.XXXXXX)"  # its store and spool

TRAIN="python3 -m radt_ext.workloads.torch_train --model resnet18 --dataset synthetic32 --epochs 3 --infer-iters 1 --batch-size {batch_size}"
if gpu_dry h200_matmul.json; then  # fp32 on the CPU (cnn_baseline): bf16 autocast crawls without bf16 instructions
  TRAIN="$TRAIN --recipe cnn_baseline --variant baseline --device cpu --precision fp32 --train-samples 64 --val-samples 16"
  SIZES="[8, 16]"; PAIR=8; DEVICE='"0"'; LISTENERS=nvml
else
  TRAIN="$TRAIN --recipe cnn_amp --variant amp --precision bf16 --train-samples 32768 --val-samples 512"
  SIZES="[256, 512]"; PAIR=256; DEVICE='"0"'; LISTENERS=nvml,gpm
  gpu_machine "$RESULTS/machine.txt" name,uuid,driver_version,mig.mode.current,power.limit
  head -n 2 "$RESULTS/machine.txt"
fi

cat > "$W/active_phase.yaml" <<YAML
name: active-phase
experiment: active-phase
devices: [$DEVICE]
listeners: $LISTENERS
child_listeners: top,gpu_procs
interval: 0.1
workloads:
  cnn:
    command: "$TRAIN"
    params: {batch_size: $PAIR}
groups:
  - {workloads: [cnn], modes: [exclusive], grid: {batch_size: $SIZES}}
  - {workloads: [cnn, cnn], modes: [naive], grid: {batch_size: [$PAIR]}}
YAML
cp "$W/active_phase.yaml" "$RESULTS/"
say "sweep: $TRAIN"
cd "$W"  # MLflow's artifacts (./mlruns) stay in the work folder
LEFT=$((BUDGET_S - SECONDS - 12))
COLUMNS=200 timeout -k 5 "$LEFT" python3 -m radt_ext.cli sweep "$W/active_phase.yaml" > "$RESULTS/sweep.log" 2>&1
say "sweep exited $? (limit ${LEFT}s)"
tail -n 20 "$RESULTS/sweep.log"
timeout 10 python3 "$REPO/benchmarks/progress/active_phase_figures.py" --experiment active-phase --out "$RESULTS" \
  >> "$RESULTS/log.txt" 2>&1 || say "figures failed (see log.txt)"
say "figures written"
cat "$RESULTS/active_phase_figures.md" 2>/dev/null
gpu_keep_store 8000  # the store, compressed, when small
say "done"
