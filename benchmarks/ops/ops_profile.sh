#!/usr/bin/env bash
# Per-operation time and energy profiles of the ops dataset grid on this GPU (run once per GPU kind):
# 6 models x 3 batch sizes x fp32/bf16 x training/inference first, extras while time is left.
# Usage: OUT=<dir> bash benchmarks/ops/ops_profile.sh  (whole script under TOTAL_S seconds, default 540;
# GRID_ARGS adds options to `python3 -m radt_ext.ops.grid`, e.g. --tiny --device cpu for a dry run;
# RESUME=1 on the same machine goes on with the grid where the last call stopped, keeping its profiles;
# GPU_TESTS=0 skips the GPU tests of the profiler)
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
TOTAL_S=${TOTAL_S:-540}
W=/tmp/ops_profile
if [ "${RESUME:-0}" = 1 ] && [ -d $W/profiles ]; then
  echo "resuming: $(ls $W/profiles/*.json 2>/dev/null | wc -l) profiles kept"
else
gpu_work $W; mkdir -p $W/profiles
(timeout 20 nvidia-smi; timeout 20 nvidia-smi -q) > $W/nvidia-smi.txt 2>&1
gpu_machine $W/env.txt; cat $W/env.txt
timeout 20 python3 -m listeners.energy_counter 2 > $W/energy_counter.json 2>&1; cat $W/energy_counter.json
if [ "${GPU_TESTS:-1}" = 1 ]; then
  timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/radt_ext/ops/test_gpu.py > $W/pytest_gpu.log 2>&1; tail -n 3 $W/pytest_gpu.log
fi
fi
LEFT=$((TOTAL_S - SECONDS - ${MARGIN_S:-45}))  # MARGIN_S: kept for packing up after the grid
echo "grid budget ${LEFT} s (started ${SECONDS} s in)"
timeout $((LEFT + 20)) python3 -m radt_ext.ops.grid --out $W/profiles --budget-s $LEFT ${GRID_ARGS:-} >> $W/grid.log 2>&1
echo "grid exit $?"
grep -c '"status": "done"' $W/profiles/grid.jsonl; tail -n 3 $W/grid.log
grep -v -E '"status": "(done|kept)"' $W/profiles/grid.jsonl | head -n 20
tar -czf $OUT/ops_profile.tar.gz -C $W .
echo "ops_profile: $(ls $W/profiles/*.csv 2>/dev/null | wc -l) profiles in ${SECONDS} s"
