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
# benchmarks/pack_unmodified.py writes summary.json (makespan_ratio, max_slowdown, bound, jobs, kinds,
# instrumented_jobs, energy_ratio, second_pass_plan_error, the goals checked) and pack_unmodified.md.
# The guard and the trials need each job's progress: for scripts that log none, radt-ext's start-up hook
# counts it; summary.json's jobs_with_progress says how many of the exclusive runs had it.
#   RESULTS=<dir> bash scripts/gpu/pack_unmodified.sh        (then tar RESULTS: about 15 files)
# DRY=1: the same flow on the CPU (NVML replayed from the derived 2-GPU trace, the scripts' tiny CPU
# versions, the stand-in MPS daemon); it proves the commands and paths, not any GPU figure
# (tests/benchmarks/test_benchmarks.py runs it on three of the scripts). QUEUE=<file>: another queue
# (its scripts beside it); WORK=<dir>: the work folder (default /tmp/pack_unmodified, made fresh).
# Expected wall time on 2 H100s: about 6-8 minutes (alone ~150 s, packed ~90 s, second ~90 s; each step
# capped, the whole under BUDGET_S, 540 by default; 1500 for DRY). Uses /tmp/pack_unmodified and its own
# MPS directories (/tmp/pack_unmodified_mps); both GPUs, so not beside another script that uses them.
set -u
export PYTHONUNBUFFERED=1
REPO=$PWD
DRY=${DRY:-0}
RESULTS=${RESULTS:-/tmp/pack_unmodified_results}; BUDGET_S=${BUDGET_S:-$([ "$DRY" = 1 ] && echo 1500 || echo 540)}
BOUND=${PACK_BOUND:-1.5}
MODES=${PACK_MODES:-naive,mps}
QUEUE=$(realpath "${QUEUE:-examples/unmodified/queue.yaml}")  # another queue file: its scripts beside it
mkdir -p "$RESULTS"
W=${WORK:-/tmp/pack_unmodified}  # the work folder (made fresh)
SPEC=()
if [ "$DRY" = 1 ]; then
  export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
  DRY=$REPO/listeners/traces/h200x2_derived.json; SPEC=(--dry)
  LIMIT_ALONE=600; LIMIT_PACKED=400
else
  unset DRY
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
  LIMIT_ALONE=220; LIMIT_PACKED=160
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/pack_unmodified_mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pack_unmodified_mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
fi
. "$REPO/scripts/gpu/batch_lib.sh"  # W fresh, its store and spool, the replay only for a dry run
if [ -n "${DRY:-}" ]; then
  mkdir -p "$W/bin"; ln -s "$REPO/tests/radt_ext/bin/nvidia-cuda-mps-control" "$W/bin/"
  export PATH=$W/bin:$PATH   # the stand-in MPS daemon
fi
say() { echo "[${SECONDS}s] $*" | tee -a "$RESULTS/steps.log"; }
python3 -c "from radt_ext.sweep.schedulers import scheduler; scheduler('pack')" 2>/dev/null \
  || { echo "radt-ext is not installed here: run pip install --no-deps --no-build-isolation --no-index -e . first"; exit 2; }
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }

{ nvidia-smi --query-gpu=index,name,memory.total,driver_version,mig.mode.current,compute_mode --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"
  python3 -c "import mlflow; print('mlflow', mlflow.__version__)"; nproc; } > "$RESULTS/machine.txt" 2>&1
say "machine: $(sed -n 2,3p "$RESULTS/machine.txt" | tr '\n' ' ')"
for step in alone packed second; do
  python3 -m benchmarks.pack_unmodified spec --step $step --out "$W/$step.yaml" --modes "$MODES" \
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
say "MPS daemons left running: $(pgrep -c nvidia-cuda-mps || true)"
echo "{$STEPS}" > "$RESULTS/steps.json"
cd "$REPO"
timeout 60 python3 -m benchmarks.pack_unmodified analyse --store "$MLFLOW_TRACKING_URI" --steps "$RESULTS/steps.json" \
  --out "$RESULTS" --max-slowdown "$BOUND" --queue "$QUEUE" --plan-packed "$RESULTS/plan_packed.txt" \
  --plan-second "$RESULTS/plan_second.txt" > "$RESULTS/analysis.log" 2>&1 || say "analysis exited $?: $(tail -1 "$RESULTS/analysis.log")"
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), lzma.open(sys.argv[2], "wb"))' \
  "$W/mlflow.db" "$RESULTS/mlflow.db.xz" 2>/dev/null  # the store, for a later look at profiles and measured pairs
SIZE=$(du -k "$RESULTS/mlflow.db.xz" 2>/dev/null | cut -f1)
if [ "${SIZE:-0}" -gt 15000 ]; then rm -f "$RESULTS/mlflow.db.xz"; say "store ${SIZE} KiB compressed: not kept"; fi
echo "==== ${SECONDS}s"; cat "$RESULTS/steps.log"; cat "$RESULTS/summary.json" 2>/dev/null
