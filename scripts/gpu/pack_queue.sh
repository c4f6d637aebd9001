#!/usr/bin/env bash
# Packing a queue on a 2-GPU node (nvidia-h100-x2): a queue of 8 mixed jobs (3 ResNet-18 32 px, 2
# ResNet-50 224 px, a DLRM with 1M-row tables, 2 bf16 matmul loads; each CNN's active phase ~6 s
# beside its ~13 s start-up, the matmuls' 6 s) run twice through `radt-ext sweep --executor pack`:
#   1. alone: `pack: {max_jobs_per_gpu: 1}`: each job alone, on whichever GPU of the pool is free (one
#      job per GPU at a time); these runs are also the jobs' exclusive profiles (a job's hashes name
#      the pool, not the GPU, so a profile from GPU 0 serves the job on GPU 1);
#   2. packed: the same queue again (repeat 1 of the same jobs), packed from those profiles under
#      max_slowdown (PACK_BOUND, default 1.5) in the modes PACK_MODES (default naive,mps: one private
#      MPS daemon per GPU, both GPUs' groups at once).
# The dry run's plan is saved before step 2; benchmarks/pack_queue.py writes the makespan ratio
# (goal <= 0.7) measured and planned, each job's predicted and measured active-phase slowdown, wall
# time and whole-run energy, and the total energy.
#   RESULTS=<dir> BUDGET_S=330 bash scripts/gpu/pack_queue.sh
# DRY=1: the same flow on the CPU (NVML replayed from the derived 2-GPU trace, tiny CPU jobs); it proves
# the commands and paths, not any GPU figure (MPS groups get the stand-in nvidia-cuda-mps-control).
# Expected wall time on 2 H100s: about 3 minutes (alone ~90 s, packed ~50-70 s; each step is capped and
# the total stays inside BUDGET_S). The store comes back compressed (mlflow.db.xz) when under 15 MB.
set -u
export PYTHONUNBUFFERED=1
REPO=$PWD
RESULTS=${RESULTS:-/tmp/pack_queue_results}; BUDGET_S=${BUDGET_S:-330}
DRY=${DRY:-0}
BOUND=${PACK_BOUND:-1.5}
MODES=${PACK_MODES:-naive,mps}
mkdir -p "$RESULTS"
W=/tmp/pack_queue
if [ "$DRY" = 1 ]; then
  export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
  DRY=$REPO/listeners/traces/h200x2_derived.json
  SMALL="python3 -m radt_ext.workloads.torch_train --recipe cnn_baseline --variant baseline --device cpu --precision fp32 --model small_cnn --dataset synthetic32 --batch-size 32 --epochs 1 --train-samples 64 --val-samples 32 --infer-iters 1"
  LARGE="$SMALL --model resnet18"
  DLRM="python3 -m radt_ext.workloads.torch_train --recipe dlrm_baseline --variant baseline --device cpu --precision fp32 --model dlrm --dataset clicks --batch-size 64 --epochs 1 --train-samples 256 --val-samples 64 --table-rows 1000 --infer-iters 1"
  MATMUL="python3 -m radt_ext.workloads.matmul --seconds 1 --size 256"
  LIMIT_ALONE=400; LIMIT_PACKED=300
else
  unset DRY
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
  SMALL="python3 -m radt_ext.workloads.torch_train --recipe cnn_amp --variant amp --precision bf16 --model resnet18 --dataset synthetic32 --batch-size 128 --epochs 3 --train-samples 32768 --val-samples 256 --infer-iters 1"
  LARGE="python3 -m radt_ext.workloads.torch_train --recipe cnn_amp --variant amp --precision bf16 --model resnet50 --dataset synthetic224 --batch-size 64 --epochs 2 --train-samples 6144 --val-samples 128 --infer-iters 1"
  DLRM="python3 -m radt_ext.workloads.torch_train --recipe dlrm_baseline --variant baseline --precision fp32 --model dlrm --dataset clicks --batch-size 2048 --epochs 3 --train-samples 65536 --val-samples 1024 --table-rows 1000000 --infer-iters 1"
  MATMUL="python3 -m radt_ext.workloads.matmul --seconds 6"
  LIMIT_ALONE=160; LIMIT_PACKED=130
  # the MPS daemons' private directories (one per GPU under these; never the host's default daemon)
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/pack_queue_mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pack_queue_mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
fi
. "$REPO/scripts/gpu/batch_lib.sh"  # W fresh, its store and spool, the replay only for a dry run
if [ -n "${DRY:-}" ]; then
  mkdir -p "$W/bin"; ln -s "$REPO/tests/radt_ext/bin/nvidia-cuda-mps-control" "$W/bin/"
  export PATH=$W/bin:$PATH   # the stand-in MPS daemon
fi
say() { echo "[${SECONDS}s] $*" | tee -a "$RESULTS/steps.log"; }
# the pack scheduler is found through its entry point: radt-ext must be installed (a source tree on
# PYTHONPATH alone does not register it); `pip install --no-deps --no-build-isolation --no-index -e .` does
python3 -c "from radt_ext.sweep.schedulers import scheduler; scheduler('pack')" 2>/dev/null \
  || { echo "radt-ext is not installed here: run pip install --no-deps --no-build-isolation --no-index -e . first"; exit 2; }
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }

{ nvidia-smi --query-gpu=index,name,memory.total,driver_version,mig.mode.current,compute_mode --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"
  python3 -c "import mlflow; print('mlflow', mlflow.__version__)"; } > "$RESULTS/machine.txt" 2>&1
say "machine: $(sed -n 2,3p "$RESULTS/machine.txt" | tr '\n' ' ')"

spec() {  # spec FILE REPEATS MAX_JOBS_PER_GPU
  cat > "$1" <<YAML
name: pack-queue
devices: ["0", "1"]
listeners: nvml:0.1,gpm:0.2
child_listeners: top:0.5,gpu_procs:0.2
schedule: pack
max_slowdown: $BOUND
modes: [$MODES]
pack: {max_jobs_per_gpu: $3}
repeats: $2
workloads:
  resnet18: {command: "$SMALL --seed {seed}", params: {seed: 1}}
  resnet50: {command: "$LARGE --seed {seed}", params: {seed: 1}}
  dlrm: {command: "$DLRM"}
  matmul: {command: "$MATMUL --idle {idle}", params: {idle: 0}}
groups:
  - {workloads: [resnet18], grid: {seed: [1, 2, 3]}}
  - {workloads: [resnet50], grid: {seed: [1, 2]}}
  - [dlrm]
  - {workloads: [matmul], grid: {idle: [0, 0.5]}}
YAML
}
cd "$W"
spec alone.yaml 1 1
spec packed.yaml 2 4
cp alone.yaml packed.yaml "$RESULTS/"

T0=$(now)
say "step alone: 8 jobs, one per GPU at a time (limit ${LIMIT_ALONE}s)"
COLUMNS=200 timeout -k 15 "$LIMIT_ALONE" python3 -m radt_ext.cli sweep alone.yaml > "$RESULTS/alone.log" 2>&1
say "step alone exited $?: $(grep -c FINISHED "$RESULTS/alone.log") FINISHED lines"
T1=$(now)
COLUMNS=220 timeout 30 python3 -m radt_ext.cli sweep packed.yaml --dry-run > "$RESULTS/plan.txt" 2>&1
say "plan: $(grep 'jobs in' "$RESULTS/plan.txt")"
T2=$(now)
LEFT=$((BUDGET_S - SECONDS - 45)); [ "$LEFT" -lt "$LIMIT_PACKED" ] && LIMIT_PACKED=$LEFT  # 45 s: the analysis
if [ "$LIMIT_PACKED" -gt 20 ]; then
  say "step packed: the same 8 jobs (limit ${LIMIT_PACKED}s)"
  COLUMNS=200 timeout -k 15 "$LIMIT_PACKED" python3 -m radt_ext.cli sweep packed.yaml > "$RESULTS/packed.log" 2>&1
  say "step packed exited $?"
else
  say "SKIP step packed: only $((BUDGET_S - SECONDS)) s left"
fi
T3=$(now)
say "MPS daemons left running: $(pgrep -c nvidia-cuda-mps || true)"
echo "{\"alone\": [$T0, $T1], \"packed\": [$T2, $T3]}" > "$RESULTS/steps.json"
cd "$REPO"
timeout 30 python3 -m benchmarks.pack_queue --store "$MLFLOW_TRACKING_URI" --steps "$RESULTS/steps.json" \
  --out "$RESULTS" --max-slowdown "$BOUND" --plan "$RESULTS/plan.txt" > "$RESULTS/analysis.log" 2>&1 || say "analysis exited $?: $(tail -1 "$RESULTS/analysis.log")"
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), lzma.open(sys.argv[2], "wb"))' \
  "$W/mlflow.db" "$RESULTS/mlflow.db.xz" 2>/dev/null  # the store compressed, for a later look at the profiles
SIZE=$(du -k "$RESULTS/mlflow.db.xz" 2>/dev/null | cut -f1)
if [ "${SIZE:-0}" -gt 15000 ]; then rm -f "$RESULTS/mlflow.db.xz"; say "store ${SIZE} KiB compressed: not kept"; fi
echo "==== ${SECONDS}s"; cat "$RESULTS/steps.log"; cat "$RESULTS/plan.txt" | grep -v "^    "; cat "$RESULTS/analysis.log"
