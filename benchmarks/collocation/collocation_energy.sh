#!/usr/bin/env bash
# Validation of each collocated workload's energy share on one GPU (run from the repository root):
#   OUT=<dir> bash benchmarks/collocation/collocation_energy.sh
# Groups (python3 -m radt_ext.cli collocate, parent listeners nvml+gpm, children top+gpu_procs), one
# SQLite store: two identical ResNet-18 32x32 trainings under naive and under MPS; two identical
# fixed-duration bf16 matmul loads (they start and end together) under naive and MPS; ResNet-50 224x224
# and ResNet-18 32x32 together naive, each alone (exclusive), and together under MPS if time is left.
# A side recorder keeps NVML's raw per-process samples (listeners.record_proc_samples) so the split can
# be recomputed offline. Reads the GPU only; private MPS daemon; never changes MIG, clocks or limits.
# DRY=1: the same flow on the CPU with the replay backend and tiny workloads (proves arguments and paths).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
BUDGET=${BUDGET:-280}  # seconds for the whole script, pip included; each part's limit comes out of what is left
SCALE=${SCALE:-1}  # DRY runs on a slow CPU: longer limits per group
OUT=${OUT:-/tmp/collocation-energy-out}; mkdir -p "$OUT"
gpu_work "${WORK:-/tmp/collocation-energy}"  # made fresh: its store and spool; the tarball holds it all
LOG=$W/log.txt  # say() writes here
gpu_mps "$W/mps"  # private MPS folders; the stand-in daemon in a dry run

COMMON="python3 -m radt_ext.workloads.torch_train --infer-iters 1"
if gpu_dry h200_matmul.json; then  # fp32: bf16 autocast crawls on a CPU without bf16 instructions
  LIGHT="$COMMON --recipe cnn_baseline --variant baseline --precision fp32 --device cpu --model resnet18 --dataset synthetic32 --batch-size 32 --epochs 1 --train-samples 64 --val-samples 32"
  HEAVY="$COMMON --recipe cnn_baseline --variant baseline --precision fp32 --device cpu --model resnet50 --dataset synthetic32 --batch-size 16 --epochs 1 --train-samples 32 --val-samples 16"
  MATMUL="python3 -m radt_ext.workloads.matmul --seconds 3 --size 256"
else
  LIGHT="$COMMON --recipe cnn_amp --variant amp --precision bf16 --model resnet18 --dataset synthetic32 --batch-size 128 --epochs 3 --train-samples 24576 --val-samples 512"
  HEAVY="$COMMON --recipe cnn_amp --variant amp --precision bf16 --model resnet50 --dataset synthetic224 --batch-size 128 --epochs 3 --train-samples 4096 --val-samples 256"
  MATMUL="python3 -m radt_ext.workloads.matmul --seconds 20 --size 8192"
fi
echo "LIGHT=$LIGHT" > "$W/commands.txt"; echo "HEAVY=$HEAVY" >> "$W/commands.txt"; echo "MATMUL=$MATMUL" >> "$W/commands.txt"

cd "$W"  # MLflow's artifacts (./mlruns) land in the work folder and go into the tarball
gpu_machine "$W/machine.txt" name,uuid,driver_version,mig.mode.current,compute_mode,power.limit,power.draw
say "machine: $(head -2 "$W/machine.txt" | tail -1)"

# raw per-process samples and power for the whole script (first seconds: the idle GPU)
timeout -k 3 $((BUDGET - SECONDS)) python3 -m listeners.record_proc_samples --out "$W/proc_samples.jsonl" --interval 0.05 \
  > "$W/proc_samples.log" 2>&1 &
SAMPLER=$!
sleep 3

group() {  # group NAME MODE LIMIT_S [collocate options...]
  local name=$1 mode=$2 limit=$(($3 * SCALE)); shift 3
  local t=$((BUDGET - SECONDS - 30))  # a part may run 15 s past its limit (SIGTERM, then SIGKILL), analysis 15 s
  [ "$t" -gt "$limit" ] && t=$limit
  if [ "$t" -lt 25 ]; then say "SKIP $name ($mode): only $((BUDGET - SECONDS)) s left"; return; fi
  say "START $name ($mode), limit $t s"
  timeout -k 15 "$t" python3 -m radt_ext.cli collocate --mode "$mode" --experiment-name collocation-energy \
    --run-name "$name" --listeners nvml:0.1,gpm:0.2 --child-listeners top:0.5,gpu_procs:0.1 "$@" > "$W/$name.log" 2>&1
  say "END $name ($mode): exit $?; $(tail -1 "$W/$name.log")"
}

# in order of need: what is left when time runs short is the MPS pair of the mixed workloads
group same-naive naive 50 --name r18a --name r18b -w "$LIGHT --seed 1" -w "$LIGHT --seed 2"
group same-matmul-naive naive 45 --name mma --name mmb -w "$MATMUL" -w "$MATMUL"
group mixed-naive naive 70 --name r50 --name r18 -w "$HEAVY" -w "$LIGHT"
group alone exclusive 85 --name r50 --name r18 -w "$HEAVY" -w "$LIGHT"
group same-mps mps 50 --name r18a --name r18b -w "$LIGHT --seed 1" -w "$LIGHT --seed 2"
group same-matmul-mps mps 45 --name mma --name mmb -w "$MATMUL" -w "$MATMUL"
group mixed-mps mps 60 --name r50 --name r18 -w "$HEAVY" -w "$LIGHT"

kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null
gpu_mps_left
timeout 15 python3 "$REPO/benchmarks/collocation/collocation_energy.py" --store "$MLFLOW_TRACKING_URI" \
  --samples "$W/proc_samples.jsonl" --out "$W/collocation_energy" > "$W/analysis.log" 2>&1 || say "analysis exit $?"
# the HTML reports (~5 MB each, plotly inside) stay out: they are rebuilt from the store offline
tar -czf "$OUT/collocation_energy.tar.gz" --exclude='*.html' -C "$W" . 2>> "$LOG"
echo "==== summary ($SECONDS s) ===="; cat "$LOG"; cat "$W/collocation_energy.md" 2>/dev/null || tail -5 "$W/analysis.log"
