#!/usr/bin/env bash
# Packing a queue the packing model never saw (nvidia-h100-x2): 10 jobs of 7 kinds never used to fit or
# tune it (examples/pack_heldout: an LSTM at batch 64 and 16, a small CNN at batch 16 and 128, transformer
# inference at batch 32 and 4, a job fed by a CPU-heavy data loader, a batched fp16 matrix multiply, a
# recommender with 2M-row tables, and a user's MLP script that imports nothing of radt-ext and logs
# nothing), run twice through `radt-ext sweep --executor pack`:
#   1. alone: `pack: {max_jobs_per_gpu: 1}`: one job per GPU at a time; these runs are the profiles, and
#      each job's first run works for JOB_S seconds (6; DRY 4) and writes how many steps that was (later runs of
#      the same command do that many: a fixed amount of work, so sharing lengthens it);
#   2. packed: the same queue again, packed under max_slowdown PACK_BOUND (1.5) in PACK_MODES (naive,mps)
#      with the guard on (a job whose live progress falls beyond the bound has its companions paused).
# benchmarks/pack_heldout.py writes per job the predicted against the measured active-phase slowdown
# (goal: none above 1.1 x the bound), what the guard did, wall times, the makespan ratio against one job
# per GPU at a time (goal <= 0.7) and the GPU energy, in total and per job.
#   RESULTS=<dir> BUDGET_S=280 bash scripts/gpu/pack_heldout.sh
# DRY=1: the same flow on the CPU (NVML replayed from the derived 2-GPU trace, tiny CPU versions of the
# jobs); it proves the commands and paths, not any GPU figure.
# Expected wall time on 2 H100s: about 3-4 minutes (alone ~100 s, packed ~60 s; each step is capped and
# the total stays inside BUDGET_S, 280 by default; 900 for DRY). Uses /tmp/pack_heldout and its own MPS
# directories (/tmp/pack_heldout_mps); both GPUs, so not beside another script that uses them.
set -u
export PYTHONUNBUFFERED=1
REPO=$PWD
DRY=${DRY:-0}
RESULTS=${RESULTS:-/tmp/pack_heldout_results}; BUDGET_S=${BUDGET_S:-$([ "$DRY" = 1 ] && echo 900 || echo 280)}
BOUND=${PACK_BOUND:-1.5}
MODES=${PACK_MODES:-naive,mps}
mkdir -p "$RESULTS"
W=/tmp/pack_heldout
JOBS="python3 -m examples.pack_heldout.jobs"
SILENT="python3 $REPO/examples/pack_heldout/silent.py"
if [ "$DRY" = 1 ]; then
  export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
  DRY=$REPO/listeners/traces/h200x2_derived.json
  JOB_S=${JOB_S:-4}; SMALL="--small --device cpu"; WORKERS=1; MM=64; ROWS=10; SILENT_W=64
  LIMIT_ALONE=420; LIMIT_PACKED=300
else
  unset DRY
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
  JOB_S=${JOB_S:-6}; SMALL=""; WORKERS=4; MM=4096; ROWS=2000; SILENT_W=2048
  LIMIT_ALONE=150; LIMIT_PACKED=110
  # the MPS daemons' private directories (one per GPU under these; never the host's default daemon)
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/pack_heldout_mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pack_heldout_mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
fi
. "$REPO/scripts/gpu/batch_lib.sh"  # W fresh, its store and spool, the replay only for a dry run
if [ -n "${DRY:-}" ]; then
  mkdir -p "$W/bin"; ln -s "$REPO/tests/radt_ext/bin/nvidia-cuda-mps-control" "$W/bin/"
  export PATH=$W/bin:$PATH   # the stand-in MPS daemon
fi
mkdir -p "$W/work"
say() { echo "[${SECONDS}s] $*" | tee -a "$RESULTS/steps.log"; }
# the pack scheduler is found through its entry point: radt-ext must be installed (a source tree on
# PYTHONPATH alone does not register it); `pip install --no-deps --no-build-isolation --no-index -e .` does
python3 -c "from radt_ext.sweep.schedulers import scheduler; scheduler('pack')" 2>/dev/null \
  || { echo "radt-ext is not installed here: run pip install --no-deps --no-build-isolation --no-index -e . first"; exit 2; }
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }

{ nvidia-smi --query-gpu=index,name,memory.total,driver_version,mig.mode.current,compute_mode --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"
  python3 -c "import mlflow; print('mlflow', mlflow.__version__)"; nproc; } > "$RESULTS/machine.txt" 2>&1
say "machine: $(sed -n 2,3p "$RESULTS/machine.txt" | tr '\n' ' ')"

job() {  # job NAME ARGS...: a workload line of the spec
  local name=$1; shift
  echo "  $name: {command: \"$JOBS $* --seconds $JOB_S --work-file $W/work/$name $SMALL\"}"
}
spec() {  # spec FILE REPEATS MAX_JOBS_PER_GPU
  { cat <<YAML
name: pack-heldout
devices: ["0", "1"]
listeners: nvml:0.1,gpm:0.2
child_listeners: top:0.5,gpu_procs:0.2
schedule: pack
max_slowdown: $BOUND
modes: [$MODES]
pack: {max_jobs_per_gpu: $3, guard: true}
repeats: $2
workloads:
YAML
    job lstm64 --kind lstm --batch 64
    job lstm16 --kind lstm --batch 16
    job cnn16 --kind cnn --batch 16
    job cnn128 --kind cnn --batch 128
    job infer32 --kind infer --batch 32
    job infer4 --kind infer --batch 4
    job loader --kind loader --batch 128 --workers $WORKERS
    job bmm --kind bmm --batch 16 --size $MM
    job recsys --kind recsys --batch 4096 --size $ROWS
    echo "  silent: {command: \"$SILENT --seconds $JOB_S --work-file $W/work/silent --width $SILENT_W\"}"
    echo "groups: [[lstm64], [lstm16], [cnn16], [cnn128], [infer32], [infer4], [loader], [bmm], [recsys], [silent]]"
  } > "$1"
}
cd "$W"
spec alone.yaml 1 1
spec packed.yaml 2 4
cp alone.yaml packed.yaml "$RESULTS/"

T0=$(now)
say "step alone: 10 jobs, one per GPU at a time (limit ${LIMIT_ALONE}s)"
COLUMNS=200 timeout -k 15 "$LIMIT_ALONE" python3 -m radt_ext.cli sweep alone.yaml > "$RESULTS/alone.log" 2>&1
say "step alone exited $?: $(grep -c FINISHED "$RESULTS/alone.log") FINISHED lines; work: $(cd "$W/work" && grep -H . * | tr '\n' ' ')"
T1=$(now)
COLUMNS=220 timeout 30 python3 -m radt_ext.cli sweep packed.yaml --dry-run > "$RESULTS/plan.txt" 2>&1
say "plan: $(grep 'jobs in' "$RESULTS/plan.txt")"
T2=$(now)
LEFT=$((BUDGET_S - SECONDS - 35)); [ "$LEFT" -lt "$LIMIT_PACKED" ] && LIMIT_PACKED=$LEFT  # 35 s: the analysis
if [ "$LIMIT_PACKED" -gt 20 ]; then
  say "step packed: the same 10 jobs, guarded (limit ${LIMIT_PACKED}s)"
  COLUMNS=200 timeout -k 15 "$LIMIT_PACKED" python3 -m radt_ext.cli sweep packed.yaml > "$RESULTS/packed.log" 2>&1
  say "step packed exited $?; guard: $(grep -c 'radt-ext guard:' "$RESULTS/packed.log") lines"
else
  say "SKIP step packed: only $((BUDGET_S - SECONDS)) s left"
fi
T3=$(now)
say "MPS daemons left running: $(pgrep -c nvidia-cuda-mps || true)"
echo "{\"alone\": [$T0, $T1], \"packed\": [$T2, $T3]}" > "$RESULTS/steps.json"
cd "$REPO"
timeout 30 python3 -m benchmarks.pack_heldout --store "$MLFLOW_TRACKING_URI" --steps "$RESULTS/steps.json" \
  --out "$RESULTS" --max-slowdown "$BOUND" --plan "$RESULTS/plan.txt" > "$RESULTS/analysis.log" 2>&1 || say "analysis exited $?: $(tail -1 "$RESULTS/analysis.log")"
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), lzma.open(sys.argv[2], "wb"))' \
  "$W/mlflow.db" "$RESULTS/mlflow.db.xz" 2>/dev/null  # the store compressed, for a later look at the profiles
SIZE=$(du -k "$RESULTS/mlflow.db.xz" 2>/dev/null | cut -f1)
if [ "${SIZE:-0}" -gt 15000 ]; then rm -f "$RESULTS/mlflow.db.xz"; say "store ${SIZE} KiB compressed: not kept"; fi
echo "==== ${SECONDS}s"; cat "$RESULTS/steps.log"; grep -v "^    " "$RESULTS/plan.txt"; cat "$RESULTS/analysis.log"
