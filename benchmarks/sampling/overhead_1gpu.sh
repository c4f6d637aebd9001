#!/usr/bin/env bash
# radt-ext's cost against the plain run on a host of one GPU, in two calls (benchmarks/sampling/overhead_plain.sh's
# jobs part, each kind's rounds interleaved and paired with a plain run of the same round):
#   STAGE=1: where radt-ext's own time around a job goes with a GPU named (benchmarks/startup/startup.py with
#            CUDA_VISIBLE_DEVICES=0, and NVML's start timed alone), then each listener of the pack proofs at its rate
#            there, alone and together as those proofs ran them (sweep-pack), beside the launch-bound decoder and
#            the host-bound GRU trainer (KINDS1, CONFIGS1, SECONDS1);
#   STAGE=2: `radt-ext run` and a sweep at their defaults beside the decoder, the GRU trainer and the DataLoader
#            trainer (KINDS2, CONFIGS2, SECONDS2);
#   STAGE=3: more rounds of `radt-ext run` at its defaults, with and without progress counting (run-np), beside the
#            decoder and the GRU trainer (KINDS3, CONFIGS3, SECONDS3, REPEATS3), on the code after the second;
#   STAGE=4: MLflow's import in a fresh interpreter (mlflow_import.txt), then the four kinds as a queue: plain, one
#            job at a time, and as a sweep's alone pass, each sweep's steps in its RADT_EXT_TIMINGS file (alone/,
#            SECONDS4 of own compute a job, REPEATS4 passes each, interleaved);
#   STAGE=5: the same queue with longer jobs (alone_long/, SECONDS5, REPEATS5);
#   STAGE=6: `radt-ext run` and a sweep at their defaults beside longer jobs of the decoder and the GRU trainer
#            (KINDS6, CONFIGS6, SECONDS6, REPEATS6; JOBS_PIN=CPUS: every job on those CPUs, plain too);
#   STAGE=7: every job on CPUs of its own (JOBS_PIN, default 2-5), plain too: `radt-ext run` and a sweep at their
#            defaults, `run` without counting (run-np) and the same without nvidia-smi's listener (every other
#            default listener at its rate), beside the decoder and the GRU trainer (KINDS7, CONFIGS7, SECONDS7,
#            REPEATS7): the decoder's cost where its CPU is its own, and whether nvidia-smi starting beside a job
#            lengthens its start-up;
#   STAGE=8: each listener alone at its default rate, a sweep at its defaults and as the pack proofs' alone pass
#            runs it (sweep-pack), beside the decoder and the GRU trainer, one job at a time on the first GPU
#            (KINDS8, CONFIGS8, SECONDS8, REPEATS8): which listener a launch- or host-bound job pays for.
# Each call leaves $OUT/overhead_1gpu.tar.gz (stage<N>/: overhead_gpu0/, startup/, nvml_start.json).
#   STAGE=1 OUT=<dir> bash benchmarks/sampling/overhead_1gpu.sh
set -u
. benchmarks/gpu_lib.sh
gpu_wheels
R=${RES:-/tmp/res}/stage${STAGE:?STAGE=1 .. 8}
mkdir -p "$R"
case $STAGE in
  1) CUDA_VISIBLE_DEVICES=0 timeout 30 python3 - > "$R/nvml_start.json" 2> "$R/nvml_start.err" <<'EOF'
import json, os, time
import pynvml as nv
from listeners.registry import check_target
from listeners.base import Target
rows = []
for _ in range(5):
    t0 = time.perf_counter(); nv.nvmlInit(); t1 = time.perf_counter(); nv.nvmlDeviceGetCount(); nv.nvmlShutdown()
    t2 = time.perf_counter(); check_target(Target(pid=None, cuda_visible_devices="0")); t3 = time.perf_counter()
    rows.append({"init_s": t1 - t0, "init_count_shutdown_s": t2 - t0, "check_target_s": t3 - t2})
procs = sorted(os.listdir("/proc/driver/nvidia/gpus")) if os.path.isdir("/proc/driver/nvidia/gpus") else None
print(json.dumps({"rows": rows, "proc_driver_gpus": procs}, indent=1))
EOF
     CUDA_VISIBLE_DEVICES=0 timeout 120 python3 -m benchmarks.startup.startup --out "$R/startup" --repeats 3 \
       --sleep-s 2 --listeners "" > "$R/startup.log" 2>&1; tail -n 25 "$R/startup.log"
     REPEATS=3 SECONDS_PER_JOB="${SECONDS1:-8}" gpu_overhead_each "$R" 0 \
       "${CONFIGS1:-plain,sweep-pack,nvml:0.1,top:0.5,gpu_procs:0.2}" "${BUDGET_S:-$((560 - SECONDS))}" "${KINDS1:-decoder,gru}" ;;
  2) REPEATS=3 SECONDS_PER_JOB="${SECONDS2:-12}" gpu_overhead_each "$R" 0 "${CONFIGS2:-plain,run,sweep}" \
       "${BUDGET_S:-$((570 - SECONDS))}" "${KINDS2:-decoder,gru,loader}" ;;
  3) REPEATS="${REPEATS3:-5}" SECONDS_PER_JOB="${SECONDS3:-8}" gpu_overhead_each "$R" 0 "${CONFIGS3:-plain,run,run-np}" \
       "${BUDGET_S:-$((560 - SECONDS))}" "${KINDS3:-decoder,gru}" ;;
  4|5) if [ "$STAGE" = 4 ]; then
       for _ in 1 2 3; do
         python3 -c 'import time; t = time.time(); import mlflow; print(f"import mlflow: {time.time() - t:.2f} s")'
       done > "$R/mlflow_import.txt" 2>&1; cat "$R/mlflow_import.txt"
       name=alone seconds=${SECONDS4:-10} repeats=${REPEATS4:-2}
     else
       name=alone_long seconds=${SECONDS5:-30} repeats=${REPEATS5:-1}
     fi
     env -u OUT RESULTS="$R/$name" WORK="/tmp/$name" PARTS=alone ALONE_SECONDS="$seconds" ALONE_REPEATS="$repeats" \
       BUDGET_S="${BUDGET_S:-$((570 - SECONDS))}" bash benchmarks/sampling/overhead_plain.sh > "$R/$name.out" 2>&1
     tail -n 12 "$R/$name.out" ;;
  6) REPEATS="${REPEATS6:-4}" SECONDS_PER_JOB="${SECONDS6:-15}" gpu_overhead_each "$R" 0 "${CONFIGS6:-plain,run,sweep}" \
       "${BUDGET_S:-$((570 - SECONDS))}" "${KINDS6:-decoder,gru}" ;;
  7) JOBS_PIN="${JOBS_PIN:-2-5}" REPEATS="${REPEATS7:-3}" SECONDS_PER_JOB="${SECONDS7:-8}" gpu_overhead_each "$R" 0 \
       "${CONFIGS7:-plain,run,sweep,run-np,nvml:0.1/gpm:0.5/top:1/gpu_procs:0.2}" "${BUDGET_S:-$((570 - SECONDS))}" \
       "${KINDS7:-decoder,gru}" ;;
  8) REPEATS="${REPEATS8:-3}" SECONDS_PER_JOB="${SECONDS8:-5}" gpu_overhead_each "$R" 0 \
       "${CONFIGS8:-plain,sweep,sweep-pack,smi:0.5,gpm:0.5,nvml:0.1,gpu_procs:0.2,top:1}" \
       "${BUDGET_S:-$((570 - SECONDS))}" "${KINDS8:-decoder,gru}" ;;
esac
wait
[ -f "$R/overhead_gpu0.out" ] && tail -n 30 "$R/overhead_gpu0.out"
[ -n "${OUT:-}" ] && tar -czf "$OUT/overhead_1gpu.tar.gz" -C "$(dirname "$R")" "$(basename "$R")"
true
