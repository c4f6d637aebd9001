#!/usr/bin/env bash
# The collocation proof on one GPU (run as root from the repo root on the GPU machine):
#   bash benchmarks/gpu_collocation.sh
# Runs examples/sweeps/gpu_collocation.yaml with `radt-ext sweep` into a SQLite store and writes
# $OUT/collocation_table.md / .json (+ the sweep log and the store, gzipped). It reads the GPU
# and starts/quits private MPS daemons; it never changes MIG mode, clocks, power limits or compute mode.
set -u
OUT=${OUT:-/tmp/radt-colloc-out}
mkdir -p "$OUT"
export MLFLOW_TRACKING_URI="sqlite:////tmp/radt-colloc/mlflow.db"
mkdir -p /tmp/radt-colloc
export RADT_EXT_SPOOL_DIR=/tmp/radt-colloc/spool
# private MPS directories for anything that does not get its own (the sweep gives each daemon its own)
export CUDA_MPS_PIPE_DIRECTORY=/tmp/radt-colloc/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/radt-colloc/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
{ nvidia-smi --query-gpu=name,uuid,mig.mode.current,compute_mode,power.limit,driver_version --format=csv; \
  python3 -c "import rich, yaml, click; print('rich ok')" 2>&1; python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())"; } > "$OUT/machine.txt" 2>&1
timeout ${SWEEP_TIMEOUT:-470} python3 -m radt_ext.cli sweep examples/sweeps/gpu_collocation.yaml > "$OUT/sweep.log" 2>&1
echo "sweep exit $?" >> "$OUT/sweep.log"
python3 benchmarks/collocation.py --experiment gpu-collocation --sweep gpu-collocation \
  --out-md "$OUT/collocation_table.md" --out-json "$OUT/collocation_table.json" > /dev/null 2>> "$OUT/sweep.log"
ps -eo pid,comm | grep -i mps >> "$OUT/sweep.log" || echo "no MPS process left" >> "$OUT/sweep.log"
gzip -c /tmp/radt-colloc/mlflow.db > "$OUT/mlflow.db.gz"
tail -25 "$OUT/sweep.log"; cat "$OUT/collocation_table.md"
