#!/usr/bin/env bash
# What 10 Hz sampling of one GPU costs at the least, and the monitor against it, in one batch on one GPU:
#   a) benchmarks.sampling.tick_floor: a process per variant (waking only; the nvml listener's driver calls alone;
#      the listener; the monitor without the writer; pinned to one CPU), GPU idle; FLOOR_VARIANTS picks them,
#      and BEFORE_FLOOR_VARIANTS (default listener,monitor) runs with the code in $BEFORE_DIR too
#   b) benchmarks.sampling.monitor_cost: the monitor process behind track(), nvml and every listener, GPU idle, with
#      this tree and, for comparison on the same machine, the code in $BEFORE_DIR (optional)
# Run from the repository root: OUT=<dir> [BEFORE_DIR=<dir>] bash benchmarks/sampling/sampling_floor.sh
# Writes $OUT/monitor_floor.tar.gz. DRY=1 (or DRY=<trace.json>): a tiny run on the replay, without a GPU.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
: "${OUT:?set OUT to the output directory}"
FLOOR_S=10 SETTLE=2 REPEATS=2 MON_S=15
FLOOR_VARIANTS=${FLOOR_VARIANTS:-idle,wake,reads,reads_pinned,listener,monitor,monitor_pinned}
BEFORE_FLOOR_VARIANTS=${BEFORE_FLOOR_VARIANTS:-listener,monitor}
if gpu_dry h200_matmul.json; then FLOOR_S=0.5 SETTLE=0.2 REPEATS=1 MON_S=1; fi
gpu_work /tmp/monitor_floor
gpu_machine $W/env.txt name,driver_version,power.limit,clocks.sm,pstate
echo "processes $(ps -e | wc -l)" >> $W/env.txt
cat $W/env.txt
part -t 22 a_tick_floor 260 python3 -m benchmarks.sampling.tick_floor --seconds $FLOOR_S --settle $SETTLE --repeats $REPEATS \
  --variants $FLOOR_VARIANTS --out $W/tick_floor
gpu_before -t 16 a_tick_floor_before 200 sampling tick_floor --seconds $FLOOR_S --settle $SETTLE --repeats $REPEATS \
  --variants $BEFORE_FLOOR_VARIANTS --out $W/tick_floor_before
part -t 6 b_monitor_idle 90 python3 -m benchmarks.sampling.monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 \
  --listeners nvml,all --phases idle --no-by-thread --out $W/monitor_idle
gpu_before -t 6 b_monitor_before 90 sampling monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 --listeners nvml,all \
  --phases idle --no-by-thread --out $W/monitor_before
tar -czf $OUT/monitor_floor.tar.gz -C $W --exclude mlflow.db --exclude spool . && ls -la $OUT
echo "== done at ${SECONDS}s"
