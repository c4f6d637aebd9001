#!/usr/bin/env bash
# The monitor's CPU on one GPU, with the code of this tree and, for comparison on the same machine, the code
# of the commit in $BEFORE_DIR (a `git archive` of it, unpacked there; optional):
#   a) CPU per sample of each listener, spaced as at 10 Hz and back to back (benchmarks.sampling.listener_cost)
#   b) the monitor process at 10 Hz per listener and all together, GPU idle; nvml and all under a bf16 load
#   c) the same, nvml and all, GPU idle, with the code before
#   d) CPU by thread, nvml and all (py-spy names the threads)
# Run from the repository root: OUT=<dir> [BEFORE_DIR=<dir>] [LISTENER_COST=0: skip a] bash benchmarks/sampling/monitor_cpu.sh  (LIMIT=560 s)
# Writes $OUT/monitor_cost.tar.gz. DRY=1 (or DRY=<trace.json>): a tiny run on the replay, without a GPU.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
: "${OUT:?set OUT to the output directory}"
LIMIT=${LIMIT:-560}
LISTENER_COST=${LISTENER_COST:-1}
MON_S=15 SETTLE=2 SAMPLES=30 THR_S=20
if gpu_dry h200_matmul.json; then MON_S=1 SETTLE=0.2 SAMPLES=3 THR_S=1; fi
gpu_work /tmp/monitor_cost
gpu_machine $W/env.txt name,driver_version,power.limit
echo "processes $(ps -e | wc -l)" >> $W/env.txt

[ "$LISTENER_COST" = 1 ] && part -t 22 a_listener_cost 150 python3 -m benchmarks.sampling.listener_cost --samples $SAMPLES \
  --out $W/listener_cost
part -t 10 b_monitor_idle 200 python3 -m benchmarks.sampling.monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 \
  --listeners nvml,gpm,smi,top,gpu_procs,all --phases idle --no-by-thread --out $W/monitor_idle
part -t 6 b_monitor_load 80 python3 -m benchmarks.sampling.monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 \
  --listeners nvml,all --phases load --no-by-thread --out $W/monitor_load
gpu_before -t 6 c_monitor_before 80 sampling monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 --listeners nvml,all \
  --phases idle --no-by-thread --out $W/monitor_before
left=$(( LIMIT - 20 - SECONDS ))
if [ $left -ge 60 ]; then
  part -t 8 d_monitor_threads $left python3 -m benchmarks.sampling.monitor_threads --seconds $THR_S --settle $SETTLE --rate 10 \
    --sets nvml,all --out $W/monitor_threads
else
  echo "== d skipped: $left s left"
fi
tar -czf $OUT/monitor_cost.tar.gz -C $W . && ls -la $OUT
echo "== done at ${SECONDS}s"
