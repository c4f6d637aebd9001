#!/usr/bin/env bash
# Packing unmodified scripts that measures instead of guessing (nvidia-h100-x2): a queue of 10 users' scripts
# of 6 kinds (examples/unmodified/queue.yaml: inference loops at batch 8 and 256, DataLoader-fed training
# with 2 and 6 workers, GRU training at batch 32 and 128, KV-cache decoding, an fp16 GEMM chain, small CNN
# training at batch 32 and 128), none importing radt-ext or logging progress, each a fixed amount of work
# (~20 s alone on an H100), run three times through `radt-ext sweep` (schedule: pack, max_slowdown
# PACK_BOUND 1.5, guard on):
#   1. alone: `pack: {max_jobs_per_gpu: 1}`, one job per GPU at a time; these runs are the profiles;
#   2. packed: the same jobs packed, trials on: jobs nothing measured together share on trial under the
#      guard (split when one falls beyond the bound); every shared group's slowdowns go to the store;
#   3. second: the same jobs again with trials and the model off, planned from what step 2 measured.
# Before each packed step its plan is printed (--dry-run: each decision's basis: measured, model or trial).
# benchmarks/packing/pack_unmodified.py writes summary.json (makespan_ratio, max_slowdown, bound, jobs, kinds,
# instrumented_jobs, energy_ratio, second_pass_plan_error, the goals checked) and pack_unmodified.md.
# The guard and the trials need each job's progress: for scripts that log none, radt-ext's start-up hook
# counts it; summary.json's jobs_with_progress says how many of the exclusive runs had it.
#   RESULTS=<dir> bash benchmarks/packing/pack_unmodified.sh        (then tar RESULTS: about 15 files)
# DRY=1: the same flow on the CPU (NVML replayed from the derived 2-GPU trace, the scripts' tiny CPU
# versions, the stand-in MPS daemon); it proves the commands and paths, not any GPU figure
# (tests/benchmarks/test_benchmarks.py runs it on three of the scripts). QUEUE=<file>: another queue
# (its scripts beside it); WORK=<dir>: the work folder (default /tmp/pack_unmodified, made fresh).
# Expected wall time on 2 H100s: about 6-8 minutes (alone ~150 s, packed ~90 s, second ~90 s; each step
# capped, the whole under BUDGET_S, 540 by default; 1500 for DRY). Uses /tmp/pack_unmodified and its own
# MPS directories in it; both GPUs, so not beside another script that uses them.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
BOUND=${PACK_BOUND:-1.5}
MODES=${PACK_MODES:-naive,mps}
QUEUE=$(realpath "${QUEUE:-examples/unmodified/queue.yaml}")  # another queue file: its scripts beside it
SPEC=()
if gpu_dry h200x2_derived.json; then
  SPEC=(--dry); LIMIT_ALONE=600; LIMIT_PACKED=400; BUDGET_S=${BUDGET_S:-1500}
else
  LIMIT_ALONE=220; LIMIT_PACKED=160; BUDGET_S=${BUDGET_S:-540}
fi
gpu_results "${RESULTS:-/tmp/pack_unmodified_results}"
gpu_work "${WORK:-/tmp/pack_unmodified}"  # the work folder, made fresh: its store and spool
gpu_mps "$W/mps"  # private MPS folders; the stand-in daemon in a dry run
gpu_need_pack
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }

gpu_machine "$RESULTS/machine.txt"
say "machine: $(sed -n 2,3p "$RESULTS/machine.txt" | tr '\n' ' ')"
for step in alone packed second; do
  python3 -m benchmarks.packing.pack_unmodified spec --step $step --out "$W/$step.yaml" --modes "$MODES" \
    --max-slowdown "$BOUND" --queue "$QUEUE" "${SPEC[@]}" || exit 2
  cp "$W/$step.yaml" "$RESULTS/"
done
cd "$W"

step() {  # step NAME LIMIT_S: one pass of the queue; its plan first for a packed pass
  local name=$1 limit=$2 left
  left=$((BUDGET_S - SECONDS - 40)); [ "$left" -lt "$limit" ] && limit=$left  # 40 s: the analysis
  if [ "$limit" -le 20 ]; then say "SKIP step $name: only $((BUDGET_S - SECONDS)) s left"; return; fi
  if [ "$name" != alone ]; then
    COLUMNS=230 timeout 60 python3 -m radt_ext.cli sweep "$name.yaml" --dry-run > "$RESULTS/plan_$name.txt" 2>&1
    say "plan $name: $(grep -E 'jobs in [0-9]+ groups on' "$RESULTS/plan_$name.txt")"
  fi
  local t0; t0=$(now)
  say "step $name (limit ${limit}s)"
  COLUMNS=200 timeout -k 15 "$limit" python3 -m radt_ext.cli sweep "$name.yaml" > "$RESULTS/$name.log" 2>&1
  say "step $name exited $?: $(grep -c 'FINISHED' "$RESULTS/$name.log") FINISHED lines; guard: $(grep -c 'radt-ext guard:' "$RESULTS/$name.log") lines; $(grep -c ': split:' "$RESULTS/$name.log") split"
  STEPS="${STEPS:+$STEPS, }\"$name\": [$t0, $(now)]"
}
STEPS=""
step alone "$LIMIT_ALONE"
step packed "$LIMIT_PACKED"
step second "$LIMIT_PACKED"
gpu_mps_left
echo "{$STEPS}" > "$RESULTS/steps.json"
cd "$REPO"
timeout 60 python3 -m benchmarks.packing.pack_unmodified analyse --store "$MLFLOW_TRACKING_URI" --steps "$RESULTS/steps.json" \
  --out "$RESULTS" --max-slowdown "$BOUND" --queue "$QUEUE" --plan-packed "$RESULTS/plan_packed.txt" \
  --plan-second "$RESULTS/plan_second.txt" > "$RESULTS/analysis.log" 2>&1 || say "analysis exited $?: $(tail -1 "$RESULTS/analysis.log")"
gpu_keep_store  # the store, for a later look at profiles and measured pairs
echo "==== ${SECONDS}s"; cat "$RESULTS/steps.log"; cat "$RESULTS/summary.json" 2>/dev/null
