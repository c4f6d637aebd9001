#!/usr/bin/env bash
# The nvml listener's 50 Hz power timeline (the driver's power sample buffer) on one GPU, most important first:
#   a) record an NVML trace with the sample buffer (idle, bf16 matmul load, idle) for the replay backend
#   b) CPU per NVML call of every GPU listener, idle and under load (and smi's nvidia-smi child)
#   c) energy fidelity, steady and bursty: the listener's power timeline against the energy counter
#   d) monitor CPU at 10 Hz: nvml alone, every available listener (idle and under load)
#   e) paired overhead (monitor thawed/frozen) on ResNet-50 224² bf16 batch 128, then the CIFAR ResNet-18
#      loop, each with a share of the time left
# Run from the repository root: OUT=<dir> bash benchmarks/sampling/power_timeline_cost.sh  (LIMIT=540 s for the whole script)
# PARTS picks parts (default abcde; PARTS=de with MON_LISTENERS=nvml,gpm,smi,top,gpu_procs,all MON_PHASES=idle
# re-measures the monitor per listener and the paired overhead, what the 2026-11-23 follow-up batch ran).
# Writes $OUT/power_sampling.tar.gz (every log, JSON, markdown table, the trace and the MLflow store).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
: "${OUT:?set OUT to the output directory}"
LIMIT=${LIMIT:-540}
# DRY=1 (or DRY=<trace.json>): a tiny run on the replay backend, without a GPU, to prove commands, arguments and paths
CALLS=200 SMI_S=3 FID_S=12 MON_S=8 SETTLE=2 REC_S=24 WARM50=8 WARM18=5 EXTRA50="" EXTRA18=""
if gpu_dry h200_matmul.json; then
  CALLS=3 SMI_S=0.5 FID_S=1 MON_S=1 SETTLE=0.5 REC_S=2 WARM50=0.5 WARM18=0.5
  EXTRA50="--image-size 32 --batch 2 --cycles 1" EXTRA18="--batch 8 --cycles 1"
fi
PARTS=${PARTS:-abcde} MON_LISTENERS=${MON_LISTENERS:-nvml,all} MON_PHASES=${MON_PHASES:-idle,load}
has() { case $PARTS in *$1*) return 0;; esac; return 1; }
gpu_work /tmp/power_sampling
mkdir -p $W/trace $W/calls $W/fidelity $W/monitor $W/paired_resnet50 $W/paired_resnet18
gpu_machine $W/env.txt name,driver_version,power.limit,clocks.max.sm
{ nvidia-smi; pip list 2>/dev/null | grep -i nvidia-ml; git log -1 --format='commit %H %s' 2>/dev/null; } >> $W/env.txt 2>&1

has a && part -t 45 a_record_trace 90 python3 -m listeners.record_trace --out $W/trace/h100_power_samples.json --seconds $REC_S \
  --interval 0.1 --gpm-interval 0.2 --load --note "idle 6 s, bf16 8192^2 matmul 12 s, idle; nvml listener with the driver's power sample buffer"

has b && part -t 45 b_call_cost 110 python3 -m benchmarks.sampling.nvml_call_cost --calls $CALLS --smi-seconds $SMI_S --phases idle,load --out $W/calls

has c && part -t 30 c_energy_fidelity 110 python3 -m benchmarks.energy.energy_fidelity --seconds $FID_S --loads steady,bursty --out $W/fidelity

has d && part -t 15 d_monitor_cost 170 python3 -m benchmarks.sampling.monitor_cost --seconds $MON_S --settle $SETTLE --rate 10 \
  --listeners $MON_LISTENERS --phases $MON_PHASES --out $W/monitor

# e) what is left, less ~25 s for packing: 55 % to ResNet-50, the rest to ResNet-18; each run needs ~40 s
#    beyond its budget (start, warm-up, ending the run) and stops measuring on SIGTERM with what it has
LEFT=$(( LIMIT - 25 - SECONDS ))
B50=$(( (LEFT - 80) * 55 / 100 ))
if has e && [ $B50 -ge 30 ]; then
  part -t 14 e1_paired_resnet50 $(( B50 + 40 )) python3 -m benchmarks.sampling.overhead_paired --model resnet50 --batch 128 \
    --budget-s $B50 --window 1 --settle 0.1 --warmup $WARM50 $EXTRA50 --out $W/paired_resnet50
else
  echo "== e1 skipped: $LEFT s left"
fi
B18=$(( LIMIT - 25 - SECONDS - 40 ))
if has e && [ $B18 -ge 30 ]; then
  part -t 14 e2_paired_resnet18 $(( B18 + 35 )) python3 -m benchmarks.sampling.overhead_paired --model cifar-resnet18 --batch 128 \
    --budget-s $B18 --window 1 --settle 0.1 --warmup $WARM18 $EXTRA18 --out $W/paired_resnet18
else
  echo "== e2 skipped: $(( LIMIT - 25 - SECONDS )) s left"
fi

echo "== summary at ${SECONDS}s"
for f in $W/calls/nvml_call_cost.md $W/fidelity/energy_fidelity.md $W/monitor/monitor_cost.md \
         $W/paired_resnet50/overhead_paired.md $W/paired_resnet18/overhead_paired.md; do
  [ -f "$f" ] && { echo "--- $f"; head -n 40 "$f"; }
done
ls -la $W/trace
tar -czf $OUT/power_sampling.tar.gz -C $W . && ls -la $OUT
echo "== done at ${SECONDS}s"
