#!/usr/bin/env bash
# Validation of each collocated workload's energy share on one GPU (run from the repository root):
#   OUT=<dir> bash scripts/gpu/collocation_energy.sh
# Groups (python3 -m radt_ext.cli collocate, parent listeners nvml+gpm, children top+gpu_procs), one
# SQLite store: two identical ResNet-18 32x32 trainings under naive and under MPS; two identical
# fixed-duration bf16 matmul loads (they start and end together) under naive and MPS; ResNet-50 224x224
# and ResNet-18 32x32 together naive, each alone (exclusive), and together under MPS if time is left.
# A side recorder keeps NVML's raw per-process samples (listeners.record_proc_samples) so the split can
# be recomputed offline. Reads the GPU only; private MPS daemon; never changes MIG, clocks or limits.
# DRY=1: the same flow on the CPU with the replay backend and tiny workloads (proves arguments and paths).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
REPO=$PWD
DRY=${DRY:-0}
BUDGET=${BUDGET:-280}  # seconds for the whole script, pip included; each part's limit comes out of what is left
SCALE=${SCALE:-1}  # DRY runs on a slow CPU: longer limits per group
OUT=${OUT:-/tmp/collocation-energy-out}
W=${WORK:-/tmp/collocation-energy}
rm -rf "$W"; mkdir -p "$W/mps/pipe" "$W/mps/log" "$OUT"
export MLFLOW_TRACKING_URI="sqlite:///$W/mlflow.db" RADT_EXT_SPOOL_DIR="$W/spool"
export CUDA_MPS_PIPE_DIRECTORY="$W/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$W/mps/log"
LOG=$W/log.txt
say() { echo "[$SECONDS s] $*" | tee -a "$LOG"; }

COMMON="python3 -m radt_ext.workloads.torch_train --infer-iters 1"
if [ "$DRY" = 1 ]; then  # fp32: bf16 autocast crawls on a CPU without bf16 instructions
  export RADT_EXT_NVML_REPLAY=${RADT_EXT_NVML_REPLAY:-$REPO/listeners/traces/h200_matmul.json}
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
{ nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,compute_mode,power.limit,power.draw --format=csv
  python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'cuda', torch.cuda.is_available())"
  python3 -c "import mlflow; print('mlflow', mlflow.__version__)"; } > "$W/machine.txt" 2>&1
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
ps -eo pid,comm | grep -i mps >> "$LOG" || echo "no MPS process left" >> "$LOG"
timeout 15 python3 "$REPO/benchmarks/collocation_energy.py" --store "$MLFLOW_TRACKING_URI" \
  --samples "$W/proc_samples.jsonl" --out "$W/collocation_energy" > "$W/analysis.log" 2>&1 || say "analysis exit $?"
# the HTML reports (~5 MB each, plotly inside) stay out: they are rebuilt from the store offline
tar -czf "$OUT/collocation_energy.tar.gz" --exclude='*.html' -C "$W" . 2>> "$LOG"
echo "==== summary ($SECONDS s) ===="; cat "$LOG"; cat "$W/collocation_energy.md" 2>/dev/null || tail -5 "$W/analysis.log"
