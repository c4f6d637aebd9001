#!/usr/bin/env bash
# A queue's pairs measured side by side on one GPU (benchmarks/packing/pair_rates.py): one `radt-ext sweep`
# runs each job of PAIRS alone, then each pair as an MPS group (PAIR_MODE), in the order given, until
# BUDGET_S; the store comes back as RESULTS/mlflow.db.xz. A later call with STORE=<that file> goes on
# in it (the sweep's resume skips what is done: the jobs alone and the pairs measured before).
#   PAIRS=vae+epochs,encoder+epochs QUEUE=examples/pack_bound/queue.yaml NAME=b RESULTS=<dir> \
#     bash benchmarks/packing/pair_rates.sh
# PAIRS=all: every two of the queue's jobs. MEASURE_S=N: each group (each job alone, each pair) stopped once its
# active phases ran N s (the sweep's measure_s): long jobs' pairs in short windows.
# Then: python -m benchmarks.packing.pair_rates fixture --store sqlite:///<store> --experiment pack-pairs-b ...
# DRY=1: the same flow on the CPU (the queue's tiny arguments, NVML replayed, the stand-in MPS daemon).
# Changes no GPU setting; uses GPU 0 only.
set -u
. benchmarks/gpu_lib.sh
QUEUE=$(realpath "${QUEUE:-examples/pack_bound/queue.yaml}")
NAME=${NAME:-b}; MODE=${PAIR_MODE:-mps}; BUDGET_S=${BUDGET_S:-560}
DRYARG=()
if gpu_dry h200x2_derived.json; then DRYARG=(--dry); else ls "$REPO"/.whl/*.whl >/dev/null 2>&1 && gpu_wheels; fi
RESULTS=$(realpath -m "${RESULTS:-/tmp/pair_rates_results/$NAME}")
gpu_results "$RESULTS"
gpu_work "$(realpath -m "${WORK:-/tmp/pair_rates_$NAME}")"
if [ -n "${STORE:-}" ]; then  # the store of a call before: go on in it
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    "$(realpath "$STORE")" "$W/mlflow.db" || { say "cannot read STORE=$STORE"; exit 2; }
fi
gpu_mps "$W/mps"
gpu_machine "$RESULTS/machine.txt"
python3 -m benchmarks.packing.pair_rates spec --queue "$QUEUE" --name "$NAME" --pairs "${PAIRS:?PAIRS=A+B,...}" \
  --mode "$MODE" ${MEASURE_S:+--measure-s "$MEASURE_S"} "${DRYARG[@]}" --out "$W/pairs.yaml" || exit 2
cp "$W/pairs.yaml" "$RESULTS/"
say "pairs of $NAME ($MODE): $PAIRS; machine: $(sed -n 2p "$RESULTS/machine.txt")"
limit=$((BUDGET_S - SECONDS - 30))
# SIGINT at the limit: the sweep ends its running group as KILLED and keeps every group done before
(cd "$W" && COLUMNS=200 timeout -s INT -k 20 "$limit" python3 -m radt_ext.cli sweep pairs.yaml > "$RESULTS/sweep.log" 2>&1)
say "sweep exited $?: $(grep -c FINISHED "$RESULTS/sweep.log") FINISHED lines"
gpu_mps_left
timeout 60 python3 -m benchmarks.packing.pair_rates fixture --store "$MLFLOW_TRACKING_URI" --experiment "pack-pairs-$NAME" \
  --card "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" --out "$RESULTS/rates.json" \
  2>&1 | tee -a "$LOG"
python3 -c 'import json, sys
for p in json.load(open(sys.argv[1]))["pairs"]: print(p["mode"], p["a"], p["b"], p["slowdowns"])' "$RESULTS/rates.json" \
  2>&1 | tee -a "$LOG"
gpu_keep_store 30000
echo "==== ${SECONDS}s"; cat "$LOG"
