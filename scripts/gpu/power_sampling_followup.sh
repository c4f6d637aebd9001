#!/usr/bin/env bash
# What the power-sampling batch could not finish, on one GPU, most important first:
#   a) monitor CPU at 10 Hz per listener (nvml, gpm, smi, top, gpu_procs) and all together, GPU idle,
#      with process utilization at most once a second and PCIe every 5 s
#   b) paired overhead on ResNet-50 224² bf16 batch 128 (the steadier loop) with the time left
# Run from the repository root: OUT=<dir> bash scripts/gpu/power_sampling_followup.sh  (LIMIT=540 s in all)
# Writes $OUT/power_sampling_followup.tar.gz. DRY=<trace.json>: a tiny run on the replay, without a GPU.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
set -u
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
LIMIT=${LIMIT:-540}
MON_S=8 SETTLE=2 WARM50=8 EXTRA50=""
if [ -n "${DRY:-}" ]; then MON_S=0.5 SETTLE=0.2 WARM50=0.5 EXTRA50="--image-size 32 --batch 2 --cycles 1"; fi
W=/tmp/power_sampling_followup
. "$(dirname "${BASH_SOURCE[0]}")/batch_lib.sh"  # fresh $W, its store and spool; part()
mkdir -p $W/monitor $W/paired_resnet50

{ nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv; nproc; } > $W/env.txt 2>&1
part a_monitor_cost 170 python3 -m benchmarks.monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 \
  --listeners nvml,gpm,smi,top,gpu_procs,all --phases idle --no-by-thread --out $W/monitor
tail -n 12 $W/a_monitor_cost.log
B50=$(( LIMIT - 25 - SECONDS - 45 ))
if [ $B50 -ge 30 ]; then
  part b_paired_resnet50 $(( B50 + 40 )) python3 -m benchmarks.overhead_paired --model resnet50 --batch 128 \
    --budget-s $B50 --window 1 --settle 0.1 --warmup $WARM50 $EXTRA50 --out $W/paired_resnet50
  tail -n 14 $W/b_paired_resnet50.log
else
  echo "== b skipped: $(( LIMIT - 25 - SECONDS )) s left"
fi
tar -czf $OUT/power_sampling_followup.tar.gz -C $W . && ls -la $OUT
echo "== done at ${SECONDS}s"
