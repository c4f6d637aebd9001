#!/usr/bin/env bash
# The pack_plain proof (docs/validation/pack_plain/) on four GPUs of one host: two pack_bound.sh side by side,
# each on its own pair of GPUs with its own work folder, store and MPS folders, so the long queue's four steps
# take three calls:
#   STAGE=1: the long queue's alone pass on GPUs 0,1 beside its plain lanes on GPUs 2,3 (one call, one host);
#   STAGE=2: the long queue's first packed pass on 0,1 beside the unmodified queue's first and second on 2,3
#            (its store, alone pass and plain lanes from docs/validation/pack_plain/unmodified where this
#            machine has none);
#   STAGE=3: the long queue's second pass on 0,1; with OVERHEAD_KINDS (e.g. "decoder,loader gru,gemm") beside
#            it on GPUs 2 and 3, a GPU for each group of kinds: benchmarks/sampling/overhead_plain.sh's jobs
#            (OVERHEAD_CONFIGS, REPEATS, SECONDS_PER_JOB).
# The work folders stay in /tmp, so each stage's call must come while the machine is still held. Everything
# lands in $OUT/pack_plain_4gpu.tar.gz (long/, unmodified/, overhead_gpu<N>/).
#   STAGE=1 OUT=<dir> bash benchmarks/packing/pack_plain_4gpu.sh
set -u
. benchmarks/gpu_lib.sh
[ "${DRY:-0}" = 0 ] && gpu_wheels  # once, before the two scripts start
R=${RES:-/tmp/res}
GPUS_A=${GPUS_A:-'["0", "1"]'} GPUS_B=${GPUS_B:-'["2", "3"]'}  # the two pairs (DRY=1: both '["0", "1"]', replayed)
LONG=(QUEUE=examples/pack_plain/queue_long.yaml NAME=long LIMIT_ALONE=540 LIMIT_PACKED=540 BUDGET_S=${BUDGET_S:-585})
pair() {  # pair LOGNAME GPUS VAR=VALUE...: one pack_bound.sh on a pair of GPUs, in the background
  local log=$1 gpus=$2; shift 2
  env -u OUT "$@" PACK_DEVICES="$gpus" bash benchmarks/packing/pack_bound.sh > "$R/$log.out" 2>&1 &
}
mkdir -p "$R"
case ${STAGE:?STAGE=1, 2 or 3} in
  1) pair long_alone "$GPUS_A" "${LONG[@]}" RESULTS=$R/long WORK=/tmp/pack_bound_long PARTS=alone
     pair long_plain "$GPUS_B" "${LONG[@]}" RESULTS=$R/long_plain WORK=/tmp/pack_bound_long_plain PARTS=plain
     wait
     # the plain lanes into the long queue's results: its next calls' analysis reads them
     cp -r "$R/long_plain/plain.json" "$R/long_plain/plain.log" "$R/long_plain/plain" "$R/long/"
     python3 -c 'import json, sys
mine, plain = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
json.dump({**mine, "plain": plain["plain"]}, open(sys.argv[1], "w"))' "$R/long/steps.json" "$R/long_plain/steps.json" ;;
  2) pair long_first "$GPUS_A" "${LONG[@]}" RESULTS=$R/long WORK=/tmp/pack_bound_long PARTS=first
     if [ ! -f "$R/unmodified/steps.json" ]; then
       mkdir -p "$R/unmodified" /tmp/pack_bound_unmodified
       cp -r docs/validation/pack_plain/unmodified/. "$R/unmodified/"
       xz -dc docs/validation/pack_plain/unmodified/mlflow.db.xz > /tmp/pack_bound_unmodified/mlflow.db
       # the runs of the first pass that call cut short go: this first pass plans from the alone pass only
       python3 -c 'import json, sqlite3, sys
end_ms = int(json.load(open(sys.argv[2]))["plain"][1] * 1000)
with sqlite3.connect(sys.argv[1]) as db:
    db.execute("UPDATE runs SET lifecycle_stage = ? WHERE start_time > ?", ("deleted", end_ms))' \
         /tmp/pack_bound_unmodified/mlflow.db "$R/unmodified/steps.json"
     fi
     pair unmodified "$GPUS_B" QUEUE=examples/unmodified/queue.yaml NAME=unmodified RESULTS=$R/unmodified \
       WORK=/tmp/pack_bound_unmodified PARTS="first second" BUDGET_S=${BUDGET_S:-585}
     wait ;;
  3) pair long_second "$GPUS_A" "${LONG[@]}" RESULTS=$R/long WORK=/tmp/pack_bound_long PARTS=second
     gpu_overhead_each "$R" 2 "${OVERHEAD_CONFIGS:-plain,run,sweep}" "${BUDGET_S:-585}" ${OVERHEAD_KINDS:-}
     wait ;;
esac
for f in "$R"/*.out; do echo "== $f"; tail -n 15 "$f"; done
[ -n "${OUT:-}" ] && tar -czf "$OUT/pack_plain_4gpu.tar.gz" -C "$R" --exclude='*.out' .
true
