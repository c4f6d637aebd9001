#!/usr/bin/env bash
# Sweep lanes on a 2-GPU machine (nvidia-h200-x2): the same four matmul jobs as a sweep on ["0", "1"]
# (a lane per GPU), on ["0"] (repeats 2), and on ["0", "1"] one variant at a time (--executor
# sequential); makespan ratios from the runs' spans in each case's SQLite store.
#   OUT=<dir> bash benchmarks/sweep/sweep_lanes.sh
# DRY=1 (or SWEEP_LANES_DRY=1): a CPU dry run of every part (NVML replayed from the derived 2-GPU trace, 1 s jobs,
# no wheel install). Typical length on two H200: about 5 minutes; the timeouts below cap it at 15.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
DRY=${DRY:-${SWEEP_LANES_DRY:-0}}
if gpu_dry h200x2_derived.json; then
  JOB_SECONDS=1; SIZE=256
else
  gpu_wheels
  JOB_SECONDS=20; SIZE=8192
fi
PY=${PYTHON:-python3}
gpu_work "${SWEEP_LANES_WORK:-/tmp/sweep_lanes}"  # each case gets its own store below
gpu_machine "$W/gpus.txt" index,name,driver_version,memory.total
cat "$W/gpus.txt"
if [ "$DRY" != 1 ] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -lt 2 ]; then
  echo "sweep_lanes: needs 2 GPUs (nvidia-h200-x2); this machine lists fewer, nothing ran" | tee "$W/summary.log"
  tar -czf "${OUT:-$W}/sweep_lanes.tar.gz" -C "$W" .
  exit 0
fi
timeout 60 $PY -m benchmarks.sweep.sweep_lanes specs --out "$W" --seconds $JOB_SECONDS --size $SIZE > "$W/specs.log" 2>&1
cat "$W/specs.log"
for case in lanes:local:240 one_gpu:local:300 sequential:sequential:300; do
  IFS=: read -r name executor limit <<< "$case"
  start=$(date +%s.%N)
  MLFLOW_TRACKING_URI=sqlite:///$W/$name.db COLUMNS=160 timeout $limit \
    $PY -m radt_ext.cli sweep "$W/$name.yaml" --executor $executor > "$W/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc, wall $($PY -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)") s" | tee -a "$W/wall.txt"
  tail -n 12 "$W/$name.log"
done
timeout 120 $PY -m benchmarks.sweep.sweep_lanes summarize --out "$W" > "$W/summary.log" 2>&1
tar -czf "${OUT:-$W}/sweep_lanes.tar.gz" -C "$W" .
echo "=== summary"
cat "$W/wall.txt" "$W/summary.log"
