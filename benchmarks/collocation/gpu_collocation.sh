#!/usr/bin/env bash
# The collocation proof on one GPU (run as root from the repo root on the GPU machine):
#   bash benchmarks/collocation/gpu_collocation.sh
# Runs examples/sweeps/gpu_collocation.yaml with `radt-ext sweep` into a SQLite store and writes
# $OUT/collocation_table.md / .json (+ the sweep log and the store, compressed). It reads the GPU
# and starts/quits private MPS daemons; it never changes MIG mode, clocks, power limits or compute mode.
# DRY=1: the sweep's plan only (--dry-run), on the CPU with the NVML replay (proves the spec and the paths).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
OUT=${OUT:-/tmp/radt-colloc-out}
PLAN=()
gpu_dry h200_matmul.json && PLAN=(--dry-run)
gpu_results "$OUT" sweep.log
gpu_work /tmp/radt-colloc  # made fresh: its store and spool
gpu_mps "$W/mps"  # for anything that does not get its own (the sweep gives each daemon its own)
gpu_machine "$RESULTS/machine.txt" name,uuid,mig.mode.current,compute_mode,power.limit,driver_version
timeout "${SWEEP_TIMEOUT:-470}" python3 -m radt_ext.cli sweep examples/sweeps/gpu_collocation.yaml "${PLAN[@]}" >> "$LOG" 2>&1
say "sweep exit $?"
python3 -m benchmarks.collocation.collocation --experiment gpu-collocation --sweep gpu-collocation \
  --out-md "$RESULTS/collocation_table.md" --out-json "$RESULTS/collocation_table.json" > /dev/null 2>> "$LOG"
gpu_mps_left
gpu_keep_store
tail -25 "$LOG"; cat "$RESULTS/collocation_table.md" 2>/dev/null
