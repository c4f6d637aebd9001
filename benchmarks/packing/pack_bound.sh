#!/usr/bin/env bash
# The per-job bound when packing, as the jobs live it (two GPUs of one host): one queue of unmodified users'
# scripts run four times, each but `plain` through `radt-ext sweep` (schedule: pack, max_slowdown PACK_BOUND 1.5,
# naive and MPS, guard on):
#   alone: one job per GPU at a time (the profiles and the baseline of each job's lived slowdown);
#   plain: the scripts as plain python, no radt-ext, one lane per GPU (benchmarks/packing/plain.py): the
#     baseline a user compares with;
#   first, second: the same packed spec (up to 4 jobs per GPU, trials on), each after its dry-run plan; the
#   second plans from what the first measured.
# benchmarks/packing/pack_bound.py then computes each packed job's lived slowdown from the store (wall time
# packed / alone, or for a job that stops on time its work rate alone / packed, the larger), the same against
# its plain run, and writes RESULTS/<NAME>.json and <NAME>.md; `pack_bound.py summarise` merges the queues
# (docs/validation/pack_plain/).
#   QUEUE=examples/unmodified/queue.yaml NAME=unmodified RESULTS=<dir> bash benchmarks/packing/pack_bound.sh
#   QUEUE=examples/pack_bound/queue.yaml NAME=b RESULTS=<dir> bash benchmarks/packing/pack_bound.sh
# PARTS: the steps of this call (default "alone plain first second", run in that order); a call whose PARTS
# leaves out `alone` and `plain`, or with KEEP=1, goes on in the WORK folder and RESULTS of the call before
# (kept, not made fresh; steps.json merged), so a long queue runs a step a call
# (examples/pack_plain/queue_long.yaml, ~5 minutes a step): PARTS=alone, then PARTS=plain KEEP=1,
# PARTS=first, PARTS=second, WORK and RESULTS the same each time. The analysis runs at the end of every
# call, on the steps done so far.
# radt-ext as a user installs it: a radt-ext wheel in .whl/ (`pip wheel --no-deps --no-build-isolation -w .whl .`)
# is installed with MLflow's there (gpu_wheels); else an installed radt-ext serves.
# Expected time on 2 H200s: unmodified ~8 minutes, b ~7 (plain ~1.5 of them); all under BUDGET_S (560 s;
# 1500 for DRY=1).
# DRY=1: the same flow on the CPU (the queue's `cpu` arguments, NVML replayed from the derived 2-GPU trace,
# the stand-in MPS daemon): it proves the commands and files, no GPU figure. WORK: the work folder (made
# fresh, default /tmp/pack_bound_<NAME>), which holds the store and the private MPS directories. Changes no
# GPU setting; uses both GPUs, so not beside another script that does. PACK_DEVICES='["0"]': one GPU only.
# PAIRS_FROM=pack-pairs-b: the packed steps know the pairs a pair sweep measured in that experiment of the same
# store (pack.pairs_from); PAIRS_STORE=<pair_rates.sh's RESULTS/mlflow.db.xz>: the fresh store starts as a copy of it.
# PARTS="alone plain pairs first second": before the packed passes, every two of the queue's jobs (and each
# job alone) measured under MPS on the GPUs, each group stopped once its active phases ran MEASURE_S (10) s
# (benchmarks/packing/pair_rates.py, experiment pack-pairs-<NAME>), which the packed passes then know
# (PAIRS_FROM set to it): a first pass planned from measured pairs. LIMIT_PAIRS: its time limit (LIMIT_PACKED).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
QUEUE=$(realpath "${QUEUE:-examples/pack_bound/queue.yaml}")
NAME=${NAME:-$(python3 -c 'import sys; from benchmarks.packing.pack_bound import default_name as d; print(d(sys.argv[1]))' "$QUEUE")}
BOUND=${PACK_BOUND:-1.5}; MODES=${PACK_MODES:-naive,mps}
SPEC=()
if gpu_dry h200x2_derived.json; then
  SPEC=(--dry); LIMIT_ALONE=${LIMIT_ALONE:-600}; LIMIT_PACKED=${LIMIT_PACKED:-400}; BUDGET_S=${BUDGET_S:-1500}
else  # a long queue's steps take ~5 minutes each: LIMIT_ALONE=520 LIMIT_PACKED=520 BUDGET_S=580, a step a call
  LIMIT_ALONE=${LIMIT_ALONE:-220}; LIMIT_PACKED=${LIMIT_PACKED:-160}; BUDGET_S=${BUDGET_S:-560}
  ls "$REPO"/.whl/*.whl >/dev/null 2>&1 && gpu_wheels
fi
PARTS=${PARTS:-alone plain first second}
FRESH=0; case " $PARTS " in *" plain "*|*" alone "*) FRESH=1 ;; esac
[ "${KEEP:-0}" = 1 ] && FRESH=0
RESULTS=$(realpath -m "${RESULTS:-/tmp/pack_bound_results/$NAME}")
[ "$FRESH" = 1 ] && rm -f "$RESULTS/steps.json"
gpu_results "$RESULTS" "steps_$(echo "$PARTS" | tr ' ' _).log"
WORK=$(realpath -m "${WORK:-/tmp/pack_bound_$NAME}")
if [ "$FRESH" = 1 ]; then
  gpu_work "$WORK"  # the work folder, made fresh: its store and spool
  if [ -n "${PAIRS_STORE:-}" ]; then  # a pair sweep's store (pair_rates.sh's mlflow.db.xz, or a .db): start in it
    python3 -c 'import lzma, shutil, sys; src = sys.argv[1]
shutil.copyfileobj(lzma.open(src) if src.endswith(".xz") else open(src, "rb"), open(sys.argv[2], "wb"))' \
      "$(realpath "$PAIRS_STORE")" "$W/mlflow.db" || { say "cannot read PAIRS_STORE=$PAIRS_STORE"; exit 2; }
  fi
else  # the steps before ran in it: its store goes on
  W=$WORK
  [ -f "$RESULTS/steps.json" ] || { echo "no steps.json in $RESULTS: run PARTS=alone first"; exit 2; }
  mkdir -p "$W"
  export MLFLOW_TRACKING_URI=sqlite:///$W/mlflow.db RADT_EXT_SPOOL_DIR=$W/spool
  unset MLFLOW_RUN_ID MLFLOW_EXPERIMENT_ID MLFLOW_EXPERIMENT_NAME RADT_EXT_ACTIVE
fi
gpu_mps "$W/mps"  # private MPS folders; the stand-in daemon in a dry run
gpu_need_pack
python3 -c 'import radt_ext; print("radt_ext from", radt_ext.__file__)' >> "$LOG"
now() { date +%s.%N; }

gpu_machine "$RESULTS/machine.txt"
say "queue $NAME ($QUEUE); machine: $(sed -n 2,3p "$RESULTS/machine.txt" | tr '\n' ' ')"
case " $PARTS " in *" pairs "*) PAIRS_FROM=${PAIRS_FROM:-pack-pairs-$NAME} ;; esac
for step in alone first second; do
  python3 -m benchmarks.packing.pack_bound spec --step $step --queue "$QUEUE" --name "$NAME" --out "$W/$step.yaml" \
    --modes "$MODES" --max-slowdown "$BOUND" --pairs-from "${PAIRS_FROM:-}" "${SPEC[@]}" || exit 2
  [ -n "${PACK_DEVICES:-}" ] && sed -i "s/^devices: .*/devices: $PACK_DEVICES/" "$W/$step.yaml"  # e.g. ["0"]
  cp "$W/$step.yaml" "$RESULTS/"
done
cd "$W"

step() {  # step NAME LIMIT_S: one pass of the queue (plain, alone, or a packed one after its plan)
  local name=$1 limit=$2 t0
  case " $PARTS " in *" $name "*) ;; *) return ;; esac
  [ $((BUDGET_S - SECONDS - 45)) -lt "$limit" ] && limit=$((BUDGET_S - SECONDS - 45))  # 45 s: the analysis
  if [ "$limit" -le 20 ]; then say "SKIP step $name: only $((BUDGET_S - SECONDS)) s left"; return; fi
  if [ "$name" = plain ]; then  # the scripts as a user runs them: plain python, a lane per GPU
    t0=$(now); say "step plain (limit ${limit}s)"
    timeout -k 15 "$limit" python3 -m benchmarks.packing.plain --queue "$QUEUE" --out "$RESULTS" \
      --devices "$LANES" "${SPEC[@]}" > "$RESULTS/plain.log" 2>&1
    say "step plain exited $?: $(tail -n 1 "$RESULTS/plain.log")"
    STEPS="${STEPS:+$STEPS, }\"plain\": [$t0, $(now)]"
    return
  fi
  if [ "$name" = pairs ]; then  # every two jobs and each alone, stopped once measured (measure_s)
    python3 -m benchmarks.packing.pair_rates spec --queue "$QUEUE" --name "$NAME" --pairs all --mode mps \
      --measure-s "${MEASURE_S:-10}" --devices "$LANES" "${SPEC[@]}" --out "$W/pairs.yaml" || return
    cp "$W/pairs.yaml" "$RESULTS/"
    t0=$(now); say "step pairs (limit ${limit}s)"
    COLUMNS=200 timeout -s INT -k 20 "$limit" python3 -m radt_ext.cli sweep pairs.yaml > "$RESULTS/pairs.log" 2>&1
    say "step pairs exited $?: $(grep -c FINISHED "$RESULTS/pairs.log") FINISHED lines"
    STEPS="${STEPS:+$STEPS, }\"pairs\": [$t0, $(now)]"
    return
  fi
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
# the plain lanes: one per device of the specs (PACK_DEVICES too); the dry run's jobs on the CPU
LANES=$(python3 -c 'import sys, yaml; print(",".join(yaml.safe_load(open(sys.argv[1]))["devices"]))' "$W/alone.yaml")
# plain after alone: both find the GPUs and the host's caches as warm as the packed passes do
step alone "$LIMIT_ALONE"; step plain "$LIMIT_ALONE"; step pairs "${LIMIT_PAIRS:-$LIMIT_PACKED}"
step first "$LIMIT_PACKED"; step second "$LIMIT_PACKED"
gpu_mps_left
python3 -c 'import json, os, sys  # this call steps merged into those of the calls before
path, now = sys.argv[1], json.loads(sys.argv[2])
before = json.load(open(path)) if os.path.exists(path) else {}
json.dump({**before, **now}, open(path, "w"))' "$RESULTS/steps.json" "{$STEPS}"
cd "$REPO"
timeout 60 python3 -m benchmarks.packing.pack_bound analyse --store "$MLFLOW_TRACKING_URI" --steps "$RESULTS/steps.json" \
  --queue "$QUEUE" --name "$NAME" --out "$RESULTS" --max-slowdown "$BOUND" --plan-first "$RESULTS/plan_first.txt" \
  --plan-second "$RESULTS/plan_second.txt" --plain "$RESULTS/plain.json" \
  > "$RESULTS/analysis.log" 2>&1 || say "analysis exited $?: $(tail -1 "$RESULTS/analysis.log")"
gpu_keep_store  # the store, for a later look at profiles and measured pairs
echo "==== ${SECONDS}s"; cat "$LOG"; head -40 "$RESULTS/$NAME.md" 2>/dev/null
