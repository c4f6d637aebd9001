#!/usr/bin/env bash
# Multi-GPU proof on a 2-GPU host: (a) MPS groups on both GPUs at once (a pooled sweep, `devices: all`,
# repeats 2) and `collocate --device 1 --mode mps`; (b) 8 equal exclusive variants pooled on 2 GPUs vs
# on 1 GPU (makespan ratio, goal <= 0.55); (c) a torchrun DDP job over both GPUs under `radt-ext run`,
# its summaries and a per-GPU integration of its power points from the store; (d) a 2-GPU replay trace
# (power sample buffer, load on GPU 1 only).
#   RESULTS=<dir> BUDGET_S=250 bash benchmarks/sweep/multi_gpu.sh     # 239 s on two H100
# PARTS=c (any of d, a, b, c; default dabc) runs only those parts.
# DRY=1: a CPU dry run (NVML replayed from the derived 2-GPU trace, the stand-in MPS daemon, gloo DDP).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
RESULTS=${RESULTS:-/tmp/multi_gpu_results}; mkdir -p "$RESULTS"
BUDGET_S=${BUDGET_S:-240}
PARTS=${PARTS:-dabc}
PY=${PYTHON:-python3}
gpu_work /tmp/multi_gpu_work  # each part gets its own store below
gpu_entry_points  # the runs a job opens itself are found through radt-ext's MLflow run context provider
MM_S=6; POOL_S=0.5; DDP_S=6; POOL_N=8; LIMIT_X=1
if gpu_dry h200x2_derived.json; then
  MM_S=2; POOL_S=0.5; DDP_S=3; POOL_N=4; LIMIT_X=4   # a shared CPU is slower than the GPU host
fi
gpu_mps "$W/mps"  # private MPS folders; the stand-in daemon in a dry run
gpu_machine "$RESULTS/gpus.txt" index,name,uuid,driver_version,power.limit
nvidia-smi -L >> "$RESULTS/gpus.txt" 2>&1
cat "$RESULTS/gpus.txt"
T0=$SECONDS
step() {  # step NAME TIMEOUT_S command...: its output in $RESULTS/NAME.log, a timing line, never stops the script
  local name=$1 limit=$(($2 * LIMIT_X)); shift 2
  local left=$((BUDGET_S - 5 - (SECONDS - T0)))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -le 5 ]; then echo "== $name SKIPPED: budget spent"; return; fi
  local t=$SECONDS
  timeout -k 5 "$limit" "$@" > "$RESULTS/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc, $((SECONDS - t)) s (limit ${limit} s, at $((SECONDS - T0)) s)"
  [ $rc -ne 0 ] && tail -n 15 "$RESULTS/$name.log"
  return 0
}
MM="$PY -m radt_ext.workloads.matmul"

# (d, first: CI needs it most) the 2-GPU replay trace: GPU 0 idle; GPU 1 idle - matmul - idle
if [[ $PARTS != *d* ]]; then
  :
elif [ "$DRY" = 1 ]; then
  echo "== d_record_trace SKIPPED in a dry run (it records a real GPU)"
else
  step d_record_trace 60 $PY -m listeners.record_trace --out "$RESULTS/h100x2_power_samples.json" --seconds 10 \
    --interval 0.1 --gpm-interval 0.2 --load --load-gpu 1 \
    --note "2x H100: GPU 0 idle; GPU 1 idle 2.5 s, bf16 8192^2 matmul 5 s, idle; nvml listener with the driver's power sample buffer"
  tail -n 4 "$RESULTS/d_record_trace.log"
fi

# (a) MPS groups on both GPUs at once: a pool of all GPUs, two repeats of one MPS group
if [[ $PARTS == *a* ]]; then
cat > "$W/mps2.yaml" <<YAML
name: mps2
devices: all
repeats: 2
listeners: nvml
child_listeners: top,gpu_procs
interval: 0.1
workloads:
  mm: {command: "$MM --seconds $MM_S"}
groups:
  - {workloads: [mm, mm], modes: [mps]}
YAML
export MLFLOW_TRACKING_URI=sqlite:///$W/mps.db
step a_mps_sweep 90 $PY -m radt_ext.cli sweep "$W/mps2.yaml"
step a_collocate_gpu1 60 $PY -m radt_ext.cli collocate --device 1 --mode mps -i 0.1 \
  -w "$MM --seconds $((MM_S * 2 / 3))" -w "$MM --seconds $((MM_S * 2 / 3))"
step a_figures 30 $PY benchmarks/sweep/multi_gpu_figures.py mps --uri "$MLFLOW_TRACKING_URI" --out "$RESULTS/mps.json"
tail -n 3 "$RESULTS/a_figures.log"
fi

# (b) 8 equal exclusive variants (4 in a dry run): pooled on both GPUs, then on GPU 0 alone
if [[ $PARTS == *b* ]]; then
for n in 2 1; do
  devices='all'; [ $n = 1 ] && devices='["0"]'
  cat > "$W/pool$n.yaml" <<YAML
name: pool$n
devices: $devices
repeats: $POOL_N
listeners: nvml
child_listeners: top
interval: 0.2
workloads:
  mm: {command: "$MM --seconds $POOL_S"}
YAML
done
export MLFLOW_TRACKING_URI=sqlite:///$W/pool2.db
step b_pool_2gpus 80 $PY -m radt_ext.cli sweep "$W/pool2.yaml"
export MLFLOW_TRACKING_URI=sqlite:///$W/pool1.db
step b_pool_1gpu 120 $PY -m radt_ext.cli sweep "$W/pool1.yaml"
step b_figures 30 $PY benchmarks/sweep/multi_gpu_figures.py pool --uri2 "sqlite:///$W/pool2.db" --uri1 "sqlite:///$W/pool1.db" \
  --out "$RESULTS/pool.json"
grep -E '"makespan(_s|_ratio)"|"met"' "$RESULTS/pool.json"
fi

# (c) a DDP job over both GPUs; rank 0 opens its own run
if [[ $PARTS == *c* ]]; then
export MLFLOW_TRACKING_URI=sqlite:///$W/ddp.db
step c_ddp 90 $PY -m radt_ext.cli run -l nvml,gpm,gpu_procs,top -- \
  $PY -m torch.distributed.run --standalone --nproc_per_node 2 -m radt_ext.workloads.ddp_train --seconds $DDP_S
step c_figures 30 $PY benchmarks/sweep/multi_gpu_figures.py ddp --uri "$MLFLOW_TRACKING_URI" --out "$RESULTS/ddp.json"

cp "$W/ddp.db" "$RESULTS/ddp_mlflow.db" 2>/dev/null   # the DDP job's runs, to check ddp.json against
step c_check 20 $PY benchmarks/sweep/multi_gpu_ddp_check.py "$W/ddp.db" --out "$RESULTS/ddp_check.json"
cat "$RESULTS/c_check.log"
fi
du -sh "$RESULTS"/* 2>/dev/null
echo "== multi_gpu done in $((SECONDS - T0)) s"
