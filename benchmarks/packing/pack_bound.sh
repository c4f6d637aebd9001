#!/usr/bin/env bash
# The per-job bound when packing, lived (two GPUs of one host): one queue of unmodified users' scripts run
# three times through `radt-ext sweep` (schedule: pack, max_slowdown PACK_BOUND 1.5, naive and MPS, guard on):
#   alone: one job per GPU at a time (the profiles and the baseline);
#   first, second: the same packed spec (up to 4 jobs per GPU, trials on), each after its dry-run plan; the
#   second plans from what the first measured.
# benchmarks/packing/pack_bound.py then computes each packed job's lived slowdown from the store (wall time
# packed / alone, or for a job that stops on time its work rate alone / packed, the larger) and writes
# RESULTS/<NAME>.json and <NAME>.md; `pack_bound.py summarise` merges the queues (docs/validation/pack_bound/).
#   QUEUE=examples/unmodified/queue.yaml NAME=unmodified RESULTS=<dir> bash benchmarks/packing/pack_bound.sh
#   QUEUE=examples/pack_bound/queue.yaml NAME=b RESULTS=<dir> bash benchmarks/packing/pack_bound.sh
# Expected time on 2 H100s: unmodified ~8 minutes, b ~5; all under BUDGET_S (560 s; 1500 for DRY=1).
# DRY=1: the same flow on the CPU (the queue's `cpu` arguments, NVML replayed from the derived 2-GPU trace,
# the stand-in MPS daemon): it proves the commands and files, no GPU figure. WORK: the work folder (made
# fresh, default /tmp/pack_bound_<NAME>), which holds the store and the private MPS directories. Changes no
# GPU setting; uses both GPUs, so not beside another script that does.
set -u
export PYTHONUNBUFFERED=1
REPO=$PWD
QUEUE=$(realpath "${QUEUE:-examples/pack_bound/queue.yaml}")
NAME=${NAME:-$(python3 -c 'import sys; from benchmarks.packing.pack_bound import default_name as d; print(d(sys.argv[1]))' "$QUEUE")}
RESULTS=${RESULTS:-/tmp/pack_bound_results/$NAME}; mkdir -p "$RESULTS"; RESULTS=$(realpath "$RESULTS")
BUDGET_S=${BUDGET_S:-$([ "${DRY:-0}" = 1 ] && echo 1500 || echo 560)}
BOUND=${PACK_BOUND:-1.5}; MODES=${PACK_MODES:-naive,mps}
W=${WORK:-/tmp/pack_bound_$NAME}
SPEC=(); LIMIT_ALONE=220; LIMIT_PACKED=160
if [ "${DRY:-0}" = 1 ]; then
  DRY=$REPO/listeners/traces/h200x2_derived.json; SPEC=(--dry); LIMIT_ALONE=600; LIMIT_PACKED=400
else
  unset DRY
fi
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
. "$REPO/scripts/gpu/batch_lib.sh"  # W fresh, its store and spool; the NVML replay only for a dry run
export CUDA_MPS_PIPE_DIRECTORY=$W/mps/pipe CUDA_MPS_LOG_DIRECTORY=$W/mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY" "$W/bin"
[ -n "${DRY:-}" ] && ln -s "$REPO/tests/radt_ext/bin/nvidia-cuda-mps-control" "$W/bin/" && export PATH=$W/bin:$PATH
say() { echo "[${SECONDS}s] $*" | tee -a "$RESULTS/steps.log"; }
now() { date +%s.%N; }
python3 -c "from radt_ext.sweep.schedulers import scheduler; scheduler('pack')" 2>/dev/null \
  || { echo "radt-ext is not installed here: run pip install --no-deps --no-build-isolation --no-index -e . first"; exit 2; }

{ nvidia-smi --query-gpu=index,name,memory.total,driver_version,mig.mode.current,compute_mode --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"
  python3 -c "import mlflow; print('mlflow', mlflow.__version__)"; nproc; } > "$RESULTS/machine.txt" 2>&1
say "queue $NAME ($QUEUE); machine: $(sed -n 2,3p "$RESULTS/machine.txt" | tr '\n' ' ')"
for step in alone first second; do
  python3 -m benchmarks.packing.pack_bound spec --step $step --queue "$QUEUE" --name "$NAME" --out "$W/$step.yaml" \
    --modes "$MODES" --max-slowdown "$BOUND" "${SPEC[@]}" || exit 2
  cp "$W/$step.yaml" "$RESULTS/"
done
cd "$W"

step() {  # step NAME LIMIT_S: one pass of the queue, a packed one after its plan
  local name=$1 limit=$2 t0
  [ $((BUDGET_S - SECONDS - 45)) -lt "$limit" ] && limit=$((BUDGET_S - SECONDS - 45))  # 45 s: the analysis
  if [ "$limit" -le 20 ]; then say "SKIP step $name: only $((BUDGET_S - SECONDS)) s left"; return; fi
  if [ "$name" != alone ]; then
    COLUMNS=230 timeout 60 python3 -m radt_ext.cli sweep "$name.yaml" --dry-run > "$RESULTS/plan_$name.txt" 2>&1
    say "plan $name: $(grep -E 'jobs in [0-9]+ groups on' "$RESULTS/plan_$name.txt")"
  fi
  t0=$(now); say "step $name (limit ${limit}s)"
  COLUMNS=200 timeout -k 15 "$limit" python3 -m radt_ext.cli sweep "$name.yaml" > "$RESULTS/$name.log" 2>&1
  say "step $name exited $?: $(grep -c FINISHED "$RESULTS/$name.log") FINISHED lines, $(grep -c ': split:' "$RESULTS/$name.log") split"
  STEPS="${STEPS:+$STEPS, }\"$name\": [$t0, $(now)]"
}
STEPS=""
step alone "$LIMIT_ALONE"; step first "$LIMIT_PACKED"; step second "$LIMIT_PACKED"
say "MPS daemons left running: $(pgrep -c nvidia-cuda-mps || true)"
echo "{$STEPS}" > "$RESULTS/steps.json"
cd "$REPO"
timeout 60 python3 -m benchmarks.packing.pack_bound analyse --store "$MLFLOW_TRACKING_URI" --steps "$RESULTS/steps.json" \
  --queue "$QUEUE" --name "$NAME" --out "$RESULTS" --max-slowdown "$BOUND" --plan-first "$RESULTS/plan_first.txt" \
  --plan-second "$RESULTS/plan_second.txt" > "$RESULTS/analysis.log" 2>&1 || say "analysis exited $?: $(tail -1 "$RESULTS/analysis.log")"
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), lzma.open(sys.argv[2], "wb"))' \
  "$W/mlflow.db" "$RESULTS/mlflow.db.xz" 2>/dev/null  # the store, kept where small
[ "$(du -k "$RESULTS/mlflow.db.xz" 2>/dev/null | cut -f1)" -gt 15000 ] 2>/dev/null && rm -f "$RESULTS/mlflow.db.xz" && say "store too large to keep"
echo "==== ${SECONDS}s"; cat "$RESULTS/steps.log"; cat "$RESULTS/$NAME.md" 2>/dev/null | head -40
