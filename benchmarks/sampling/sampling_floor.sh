#!/usr/bin/env bash
# What 10 Hz sampling of one GPU costs at the least, and the monitor against it, in one batch on one GPU:
#   a) benchmarks.tick_floor: a process per variant (waking only; the nvml listener's driver calls alone;
#      the listener; the monitor without the writer; pinned to one CPU), GPU idle; FLOOR_VARIANTS picks them,
#      and BEFORE_FLOOR_VARIANTS (default listener,monitor) runs with the code in $BEFORE_DIR too
#   b) benchmarks.monitor_cost: the monitor process behind track(), nvml and every listener, GPU idle, with
#      this tree and, for comparison on the same machine, the code in $BEFORE_DIR (optional)
# Run from the repository root: OUT=<dir> [BEFORE_DIR=<dir>] bash scripts/gpu/sampling_floor.sh
# Writes $OUT/monitor_floor.tar.gz. DRY=<trace.json>: a tiny run on the replay, without a GPU.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
set -u
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
FLOOR_S=10 SETTLE=2 REPEATS=2 MON_S=15
FLOOR_VARIANTS=${FLOOR_VARIANTS:-idle,wake,reads,reads_pinned,listener,monitor,monitor_pinned}
BEFORE_FLOOR_VARIANTS=${BEFORE_FLOOR_VARIANTS:-listener,monitor}
if [ -n "${DRY:-}" ]; then FLOOR_S=0.5 SETTLE=0.2 REPEATS=1 MON_S=1; fi
W=/tmp/monitor_floor
. "$(dirname "${BASH_SOURCE[0]}")/batch_lib.sh"  # fresh $W, its store and spool; part()

{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm,pstate --format=csv; nproc; ps -e | wc -l
  head -n 30 /proc/cpuinfo | grep -m1 "model name"; python3 -c "import torch; print('torch', torch.__version__)"; } > $W/env.txt 2>&1
cat $W/env.txt
part a_tick_floor 260 python3 -m benchmarks.tick_floor --seconds $FLOOR_S --settle $SETTLE --repeats $REPEATS \
  --variants $FLOOR_VARIANTS --out $W/tick_floor
tail -n 22 $W/a_tick_floor.log
if [ -n "${BEFORE_DIR:-}" ] && [ -f "$BEFORE_DIR/benchmarks/tick_floor.py" ]; then
  (cd "$BEFORE_DIR" && PYTHONPATH=/tmp/site:$PWD part a_tick_floor_before 200 python3 -m benchmarks.tick_floor \
    --seconds $FLOOR_S --settle $SETTLE --repeats $REPEATS --variants $BEFORE_FLOOR_VARIANTS --out $W/tick_floor_before)
  tail -n 16 $W/a_tick_floor_before.log
fi
part b_monitor_idle 90 python3 -m benchmarks.monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 \
  --listeners nvml,all --phases idle --no-by-thread --out $W/monitor_idle
tail -n 6 $W/b_monitor_idle.log
if [ -n "${BEFORE_DIR:-}" ] && [ -d "$BEFORE_DIR" ]; then
  (cd "$BEFORE_DIR" && PYTHONPATH=/tmp/site:$PWD part b_monitor_before 90 python3 -m benchmarks.monitor_cost \
    --seconds $MON_S --settle $SETTLE --rate 10 --listeners nvml,all --phases idle --no-by-thread --out $W/monitor_before)
  tail -n 6 $W/b_monitor_before.log
fi
tar -czf $OUT/monitor_floor.tar.gz -C $W --exclude mlflow.db --exclude spool . && ls -la $OUT
echo "== done at ${SECONDS}s"
