# What every GPU proof and benchmark batch repeats; each script of benchmarks/<group>/ sources it first, from the
# repository root:   . benchmarks/gpu_lib.sh
# Sourcing sets REPO (this checkout), PYTHONUNBUFFERED=1 and this checkout on PYTHONPATH; nothing else runs
# until a function is called:
#   gpu_wheels [DIR...]        MLflow's client wheels carried in .whl/ (and DIR's) into /tmp/site, first on the paths
#                              (once: a script started by one that did only puts /tmp/site on its paths)
#   gpu_dry TRACE              DRY=1 (or DRY=<trace.json>): the NVML replay of listeners/traces/TRACE (or that
#                              trace), DRY left 1, true; else the real NVML, DRY left 0, false
#   gpu_work DIR               W=DIR made fresh, with its own MLflow store and spool; no run or experiment inherited
#   gpu_results DIR [LOG]      RESULTS=DIR made, with a fresh LOG (default steps.log) that `say` writes to
#   say TEXT...                "[Ns] TEXT" on stdout and in the log
#   part [-t N] NAME LIMIT_S CMD...
#                              CMD under its own timeout, its output in $W/NAME.log (-t: its last N lines shown after);
#                              a failure never stops the script
#   gpu_mps DIR                private MPS pipe and log folders under DIR; in a dry run the stand-in MPS daemon first
#                              on PATH (tests/radt_ext/bin)
#   gpu_mps_left               says how many MPS daemons are left running; one left in the private folders told to quit
#   gpu_machine FILE [FIELDS]  the GPUs (nvidia-smi --query-gpu=FIELDS), Python, torch, MLflow, the CPUs and the
#                              CUDA/torch/OMP settings of the environment into FILE
#   gpu_keep_store [MAX_KIB]   $W/mlflow.db into $RESULTS/mlflow.db.xz, dropped (and said) when larger than MAX_KIB
#   gpu_need_pack              exits 2 with one line unless radt-ext's pack scheduler is installed here
#   gpu_overhead_each R GPU CONFIGS BUDGET_S KINDS...
#                              benchmarks/sampling/overhead_plain.sh's jobs part in the background, a GPU for each
#                              group of KINDS (GPU, GPU+1, ...; comma-separated kinds each), its rounds interleaved:
#                              R/overhead_gpu<N>/ and its output R/overhead_gpu<N>.out; `wait` after
#   gpu_entry_points           radt-ext's entry points found by MLflow where the package is on PYTHONPATH but not
#                              installed (a minimal dist-info under $W/meta)
#   gpu_grid LABEL BUDGET_S ARGS...
#                              one `python3 -m radt_ext.ops.grid` call into $P/LABEL inside its own budget (skipped
#                              below GRID_MIN_S, default 10 s), its output in $RESULTS/LABEL.log, a line said; with
#                              DRY=1 on the CPU with short windows (GRID_DRY_SET: two small modules of the tests)
#   gpu_grid_pack BYTES LABEL...
#                              after the grids: the GPU's state (nvidia-smi-after.txt), then the profiles of each
#                              $P/LABEL packed into $RESULTS/LABEL.csv.gz and rounds.csv.gz (benchmarks.ops.ops_heldout
#                              pack), the first BYTES of its log shown
#   gpu_before [-t N] NAME LIMIT_S GROUP MODULE ARGS...
#                              `part NAME` of `python3 -m` benchmark MODULE with the code unpacked in $BEFORE_DIR
#                              (an older commit, laid out by group or, from before the groups, flat); true and
#                              nothing run where BEFORE_DIR is unset or lacks MODULE
# Every function reads and sets plain shell variables (REPO, DRY, W, RESULTS, LOG); none calls `exit` but
# gpu_need_pack.

REPO=${REPO:-$PWD}
export PYTHONUNBUFFERED=1
case ":${PYTHONPATH:-}:" in *":$REPO:"*) ;; *) export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH} ;; esac

gpu_wheels() {
  local dir wheels
  if [ "${GPU_WHEELS_IN:-}" != /tmp/site ]; then  # else installed by the script that started this one
    for dir in .whl "$@"; do
      wheels=$(ls "$REPO/$dir"/*.whl 2>/dev/null)
      if [ -z "$wheels" ]; then echo "no wheels in $dir/: the installed packages serve"; continue; fi
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels
    done
    # nvidia-ml-py, installed on the host without its bytecode: compiling pynvml took 0.07 s in every process
    # that reads NVML (a sweep's device check before its first job); a user's pip install compiles it
    python3 -c 'import pynvml, shutil; shutil.copy(pynvml.__file__, "/tmp/site/")' 2>/dev/null || true
    # compiled as `pip install` compiles for a user: else every fresh interpreter compiles what it imports
    # where bytecode is not written (PYTHONDONTWRITEBYTECODE), MLflow's import seconds longer than a user's
    python3 -m compileall -q -j 0 /tmp/site >/dev/null 2>&1 || true
    # the host's own packages a sweep imports (numpy, requests, psutil, ...) were installed without bytecode too
    (cd "$REPO" && PYTHONPATH=/tmp/site:$PYTHONPATH python3 -m benchmarks.startup.bytecode --compile) >&2 || true
  fi
  case ":$PYTHONPATH:" in *":/tmp/site:"*) ;; *) export PYTHONPATH=/tmp/site:$PYTHONPATH ;; esac
  export PATH=/tmp/site/bin:$PATH GPU_WHEELS_IN=/tmp/site
}

gpu_dry() {
  case "${DRY:-0}" in
    0|"") DRY=0; unset RADT_EXT_NVML_REPLAY; return 1 ;;
    1) export RADT_EXT_NVML_REPLAY=${RADT_EXT_NVML_REPLAY:-$REPO/listeners/traces/$1} ;;
    *) export RADT_EXT_NVML_REPLAY=$DRY ;;
  esac
  DRY=1
}

gpu_work() {
  W=$1
  rm -rf "$W"; mkdir -p "$W"
  export MLFLOW_TRACKING_URI=sqlite:///$W/mlflow.db RADT_EXT_SPOOL_DIR=$W/spool
  unset MLFLOW_RUN_ID MLFLOW_EXPERIMENT_ID MLFLOW_EXPERIMENT_NAME RADT_EXT_ACTIVE
}

gpu_results() {
  RESULTS=$1
  LOG=$RESULTS/${2:-steps.log}
  mkdir -p "$RESULTS"; : > "$LOG"
}

say() { echo "[${SECONDS}s] $*" | tee -a "${LOG:-/dev/null}"; }

part() {
  local lines=0
  [ "$1" = -t ] && { lines=$2; shift 2; }
  local name=$1 limit=$2; shift 2
  echo "== $name at ${SECONDS}s (timeout ${limit}s): $*"
  timeout -k 10 "$limit" "$@" > "$W/$name.log" 2>&1
  echo "== $name exited $? at ${SECONDS}s"
  [ "$lines" -gt 0 ] && tail -n "$lines" "$W/$name.log"
  return 0
}

gpu_mps() {
  MPS_DIR=$1
  export CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if [ "${DRY:-0}" = 1 ]; then
    mkdir -p "$MPS_DIR/bin"; ln -sf "$REPO/tests/radt_ext/bin/nvidia-cuda-mps-control" "$MPS_DIR/bin/"
    export PATH=$MPS_DIR/bin:$PATH
  fi
}

gpu_mps_left() {
  say "MPS daemons left running: $(pgrep -c nvidia-cuda-mps || true)"
  [ -n "${MPS_DIR:-}" ] && [ -n "$(ls -A "$MPS_DIR/pipe" 2>/dev/null)" ] \
    && echo quit | timeout 30 nvidia-cuda-mps-control > /dev/null 2>&1
  return 0
}

gpu_machine() {
  { nvidia-smi --query-gpu="${2:-index,name,memory.total,driver_version,mig.mode.current,compute_mode,power.limit}" \
      --format=csv
    python3 -c "import platform; print('python', platform.python_version())"
    timeout 60 python3 -c "import torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
p = torch.cuda.get_device_properties(0) if n else None
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'gpus', n,
      *((p.name, 'sm', p.multi_processor_count) if p else ()))" 2>&1 | tail -n 1
    python3 -c "import mlflow; print('mlflow', mlflow.__version__)" 2>&1 | tail -n 1
    echo "cpus $(nproc):$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); load $(cut -d' ' -f1-3 /proc/loadavg)"
    lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|CPU max MHz|Hypervisor)'
    env | grep -E '^(CUBLAS|CUDNN|CUDA_|TORCH_|NVIDIA_VISIBLE|OMP_)'; } > "$1" 2>&1
}

gpu_keep_store() {
  local size
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), lzma.open(sys.argv[2], "wb"))' \
    "$W/mlflow.db" "$RESULTS/mlflow.db.xz" 2>/dev/null
  size=$(du -k "$RESULTS/mlflow.db.xz" 2>/dev/null | cut -f1)
  if [ "${size:-0}" -gt "${1:-15000}" ]; then rm -f "$RESULTS/mlflow.db.xz"; say "store ${size} KiB compressed: not kept"; fi
}

gpu_need_pack() {
  # the pack scheduler is found through its entry point: a source tree on PYTHONPATH alone does not register it
  python3 -c "from radt_ext.sweep.schedulers import scheduler; scheduler('pack')" 2>/dev/null && return 0
  echo "radt-ext is not installed here: run pip install --no-deps --no-build-isolation --no-index -e . first"
  exit 2
}

gpu_entry_points() {
  python3 -c "import importlib.metadata as m, sys
sys.exit(not any(e.value.startswith('radt_ext.') for e in m.entry_points(group='mlflow.run_context_provider')))" \
    2>/dev/null && return 0
  local meta=$W/meta/radt_ext-0.dist-info
  mkdir -p "$meta"
  printf 'Metadata-Version: 2.1\nName: radt-ext\nVersion: 0\n' > "$meta/METADATA"
  sed -n '/^\[options.entry_points\]/,/^\[/p' "$REPO/setup.cfg" | sed '1d;$d' \
    | awk '/^[^ ]/{sub(/ *=$/,""); print "[" $0 "]"; next} NF{sub(/^ +/,""); print}' > "$meta/entry_points.txt"
  export PYTHONPATH=$PYTHONPATH:$W/meta
  echo "== radt-ext's entry points registered from $W/meta (the package is not installed)"
}

GRID_DRY_SET="--models tests.radt_ext.ops.modules:TokensAndMask,tests.radt_ext.ops.modules:pair_of_inputs --extra= \
--batches tests.radt_ext.ops.modules:TokensAndMask=4,tests.radt_ext.ops.modules:pair_of_inputs=4"
gpu_grid() {
  local label=$1 budget=$2; shift 2
  [ "${DRY:-0}" = 1 ] && set -- --device cpu --window-s 0.005 --net-window-s 0.01 "$@"
  if [ "$budget" -lt "${GRID_MIN_S:-10}" ]; then say "$label: skipped, ${budget} s left"; return; fi
  say "$label: grid budget ${budget} s"
  timeout -k 5 $((budget + 15)) python3 -m radt_ext.ops.grid --out "$P/$label" --budget-s "$budget" --net-rounds 5 "$@" \
    >> "$RESULTS/$label.log" 2>&1
  say "$label: exit $?; $(grep -c '"status": "done"' "$P/$label/grid.jsonl" 2>/dev/null) done; $(tail -n 1 "$RESULTS/$label.log")"
  grep -E '"status": "(failed|skipped)"' "$P/$label/grid.jsonl" 2>/dev/null | tee -a "$LOG" | head -n 30
}

gpu_grid_pack() {
  local bytes=$1 label from=(); shift
  for label in "$@"; do from+=(--from "$label=$P/$label"); done
  [ "${DRY:-0}" = 1 ] || (timeout 20 nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE,POWER) > "$RESULTS/nvidia-smi-after.txt" 2>&1
  timeout 60 python3 -m benchmarks.ops.ops_heldout pack "${from[@]}" --out "$RESULTS" > "$RESULTS/pack.log" 2>&1
  say "pack: exit $?"
  head -c "$bytes" "$RESULTS/pack.log"
  say "$(basename "$0" .sh): $(ls "$P"/*/*.json 2>/dev/null | wc -l) profiles, $(du -sh "$RESULTS" | cut -f1) in RESULTS"
}

gpu_before() {
  local tail=()
  [ "$1" = -t ] && { tail=(-t "$2"); shift 2; }
  local name=$1 limit=$2 group=$3 module=$4 found; shift 4
  [ -n "${BEFORE_DIR:-}" ] || return 0
  for found in "benchmarks.$group.$module" "benchmarks.$module"; do
    [ -f "$BEFORE_DIR/$(echo "$found" | tr . /).py" ] && break
    found=""
  done
  if [ -z "$found" ]; then echo "== $name skipped: no $module in $BEFORE_DIR"; return 0; fi
  (cd "$BEFORE_DIR" && export PYTHONPATH=/tmp/site:$PWD && part ${tail[@]+"${tail[@]}"} "$name" "$limit" python3 -m "$found" "$@")
}

gpu_overhead_each() {
  local r=$1 gpu=$2 configs=$3 budget=$4 kinds
  shift 4
  for kinds in "$@"; do
    env -u OUT RESULTS="$r/overhead_gpu$gpu" WORK="/tmp/overhead_gpu$gpu" PARTS=jobs KINDS="$kinds" JOBS_GPU=$gpu \
      ALONE_S=0 CONFIGS="$configs" BUDGET_S="$budget" bash benchmarks/sampling/overhead_plain.sh \
      > "$r/overhead_gpu$gpu.out" 2>&1 &
    gpu=$((gpu + 1))
  done
}
