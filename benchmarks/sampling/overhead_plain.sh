#!/usr/bin/env bash
# radt-ext's cost against the plain run on one GPU host, in one call (benchmarks/sampling/overhead_plain.py):
#   jobs:  four kinds of unmodified job, each plain, under `radt-ext run`, as a sweep's job and under each listener
#          alone, interleaved in shuffled rounds (REPEATS, SECONDS of each job's own compute time, CONFIGS);
#   alone: the same four jobs as a queue, plain one job per GPU, then as a sweep's alone pass (ALONE_SECONDS,
#          ALONE_REPEATS);
#   analyse: the tables and summary.json, all of it in $OUT/overhead_plain.tar.gz.
#     OUT=<dir> bash benchmarks/sampling/overhead_plain.sh
# radt-ext as a user installs it: a radt-ext wheel in .whl/ (`pip wheel --no-deps --no-build-isolation -w .whl .`)
# goes in with MLflow's (gpu_wheels); else the checkout on PYTHONPATH serves. DRY=1: the scripts' CPU versions
# and the NVML replay (plumbing only). Changes no GPU setting. PARTS="jobs alone" picks the parts; JOBS_GPU: the
# GPU the jobs part runs its jobs on (default: CUDA's first, the sweep's own pick); JOBS_PIN: CPUs every job of the
# jobs part runs on (taskset -c), in every configuration, plain too.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
ARGS=()
if gpu_dry h200_matmul.json; then ARGS=(--dry); else ls "$REPO"/.whl/*.whl >/dev/null 2>&1 && gpu_wheels; fi
export PATH=/tmp/site/bin:$PATH
gpu_results "$(realpath -m "${RESULTS:-/tmp/overhead_plain_results}")"
gpu_work "${WORK:-/tmp/overhead_plain_work}"
cd "$W"  # the store and the sweeps' files beside it
gpu_machine "$RESULTS/machine.txt"
say "radt-ext from $(python3 -c 'import radt_ext; print(radt_ext.__file__)'), $(command -v radt-ext || echo 'python3 -m radt_ext.cli')"
BUDGET_S=${BUDGET_S:-540}
KINDS=${KINDS:-decoder,gru,loader,gemm}
for p in ${PARTS:-jobs alone}; do
  case $p in
    jobs) say "jobs"; timeout -k 10 $((BUDGET_S - SECONDS - ${ALONE_S:-90})) python3 -m benchmarks.sampling.overhead_plain jobs \
            --out "$RESULTS" --kinds "$KINDS" --repeats "${REPEATS:-3}" --seconds "${SECONDS_PER_JOB:-2}" \
            --budget-s $((BUDGET_S - SECONDS - ${ALONE_S:-90} - 20)) ${CONFIGS:+--configs "$CONFIGS"} \
            ${JOBS_GPU:+--gpu "$JOBS_GPU"} ${JOBS_PIN:+--pin "$JOBS_PIN"} "${ARGS[@]}" \
            > "$RESULTS/jobs.log" 2>&1
          say "jobs exited $?: $(grep -c '^round' "$RESULTS/jobs.log") jobs" ;;
    alone) say "alone"; timeout -k 10 $((BUDGET_S - SECONDS - 15)) python3 -m benchmarks.sampling.overhead_plain alone \
            --out "$RESULTS" --kinds "$KINDS" --repeats "${ALONE_REPEATS:-1}" --seconds "${ALONE_SECONDS:-6}" \
            "${ARGS[@]}" > "$RESULTS/alone.log" 2>&1
          say "alone exited $?"; tail -n 4 "$RESULTS/alone.log" ;;
    contention) { timeout -k 5 "${CONTENTION_S:-70}" python3 -m benchmarks.sampling.nvml_contention \
            --out "$RESULTS" > "$RESULTS/contention.log" 2>&1; say "contention exited $?"; } ;;
  esac
done
python3 -m benchmarks.sampling.overhead_plain analyse --out "$RESULTS" --summary "$RESULTS/summary.json" \
  > "$RESULTS/analyse.log" 2>&1 || tail -n 20 "$RESULTS/analyse.log"
cat "$RESULTS/overhead_plain.md" 2>/dev/null
gpu_keep_store 12000
[ -n "${OUT:-}" ] && tar -czf "$OUT/overhead_plain.tar.gz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
true
