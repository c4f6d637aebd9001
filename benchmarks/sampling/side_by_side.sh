#!/usr/bin/env bash
# radt-ext's cost against the plain run on a host of two GPUs, each pair at the same time (side_by_side.py): the
# same unmodified script plain on one GPU and under radt-ext on the other, started together, the GPUs swapped every
# round. One call; leaves $OUT/side_by_side.tar.gz (pairs.jsonl, each job's stamp and log, the store):
#   OUT=<dir> [KINDS=decoder,gru,loader] [CONFIGS=run,sweep] [REPEATS=6] [SECONDS_PER_JOB=6] [BUDGET_S=520] \
#     bash benchmarks/sampling/side_by_side.sh
set -u
. benchmarks/gpu_lib.sh
gpu_wheels
BUDGET_S=${BUDGET_S:-520}
gpu_results "$(realpath -m "${RES:-/tmp/res}/side_by_side")"
gpu_work /tmp/side_by_side_work
cd "$W"
gpu_machine "$RESULTS/machine.txt"
say "pairs"
timeout -k 10 $((BUDGET_S - SECONDS - 10)) python3 -m benchmarks.sampling.side_by_side pairs --out "$RESULTS" \
  --kinds "${KINDS:-decoder,gru,loader}" --configs "${CONFIGS:-run,sweep}" --repeats "${REPEATS:-6}" \
  --seconds "${SECONDS_PER_JOB:-6}" --budget-s $((BUDGET_S - SECONDS - 40)) > "$RESULTS/pairs.log" 2>&1
say "pairs exited $?: $(grep -c '^round' "$RESULTS/pairs.log") pairs"
python3 -m benchmarks.sampling.side_by_side analyse --out "$RESULTS" --json "$RESULTS/side_by_side.json" \
  > "$RESULTS/side_by_side.md" 2>&1
cat "$RESULTS/side_by_side.md"
[ -f "$W/mlflow.db" ] && xz -c "$W/mlflow.db" > "$RESULTS/mlflow.db.xz"
[ -n "${OUT:-}" ] && tar -czf "$OUT/side_by_side.tar.gz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
true
