#!/usr/bin/env bash
# Why a network's rounds disagree on one GPU: networks measured round after round, metered as the profiler
# does, timed only, and after idle gaps (benchmarks.ops_spread).
# Run from the repository root: OUT=<dir> bash scripts/gpu/network_round_spread.sh
#   (SPREAD_ARGS: other options, e.g. --configs resnet50:256:bf16:training --rounds 4)
# Writes $OUT/network_round_spread.tar.gz. DRY=<trace.json>: a tiny run on the CPU, without a GPU.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
SPREAD_ARGS=${SPREAD_ARGS:---rounds 6}
if [ -n "${DRY:-}" ]; then SPREAD_ARGS="--rounds 2 --configs mlp:8:fp32:training --device cpu --window 0.02"; fi
W=/tmp/network_round_spread
. "$(dirname "${BASH_SOURCE[0]}")/batch_lib.sh"  # fresh $W, its store and spool; part()
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm,pstate --format=csv; nproc
  python3 -c "import torch; print('torch', torch.__version__)"; } > $W/env.txt 2>&1
part ops_spread 200 python3 -m benchmarks.ops_spread $SPREAD_ARGS --out $W/ops_spread
tail -n 22 $W/ops_spread.log
tar -czf $OUT/network_round_spread.tar.gz -C $W --exclude mlflow.db --exclude spool . && ls -la $OUT
echo "== done at ${SECONDS}s"
