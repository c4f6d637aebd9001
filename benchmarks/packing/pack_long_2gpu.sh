#!/usr/bin/env bash
# The long queue of the pack_plain proof (docs/validation/pack_plain/long/) on a host of two GPUs of its own,
# a step a call (each ~5 minutes; the machine held between calls, its work folder in /tmp goes on):
#   STAGE=1: the alone pass;  STAGE=2: the plain lanes (no radt-ext, a lane per GPU);
#   STAGE=3: the first packed pass;  STAGE=4: the second.
#   STAGE=5: radt-ext's cost against the plain run (benchmarks/sampling/overhead_plain.sh's jobs part), a GPU
#            for each group of kinds in OVERHEAD_KINDS (default "decoder loader"), its rounds interleaved;
#            OVERHEAD_CONFIGS, REPEATS, SECONDS_PER_JOB, BUDGET_S as that script reads them.
# Every call leaves what it has so far in $OUT/pack_long_2gpu.tar.gz (long/, overhead_gpu<N>/).
#   STAGE=1 OUT=<dir> bash benchmarks/packing/pack_long_2gpu.sh
set -u
. benchmarks/gpu_lib.sh
[ "${DRY:-0}" = 0 ] && gpu_wheels  # once, before the scripts it starts
R=${RES:-/tmp/res}
mkdir -p "$R"
LONG=(QUEUE=examples/pack_plain/queue_long.yaml NAME=long LIMIT_ALONE=540 LIMIT_PACKED=540
      BUDGET_S=${BUDGET_S:-585} RESULTS=$R/long WORK=/tmp/pack_bound_long)
long() { env -u OUT "${LONG[@]}" PARTS="$1" ${2:+KEEP=1} bash benchmarks/packing/pack_bound.sh > "$R/long_$3.out" 2>&1; }
case ${STAGE:?STAGE=1 to 5} in
  1) long alone "" alone ;;
  2) long plain keep plain ;;
  3) long first "" first ;;
  4) long second "" second ;;
  5) gpu_overhead_each "$R" 0 "${OVERHEAD_CONFIGS:-plain,run,sweep,top:60}" "${BUDGET_S:-400}" \
       ${OVERHEAD_KINDS:-decoder loader}
     wait ;;
esac
for f in "$R"/*.out; do echo "== $f"; tail -n 15 "$f"; done
[ -n "${OUT:-}" ] && tar -czf "$OUT/pack_long_2gpu.tar.gz" -C "$R" --exclude='*.out' .
true
