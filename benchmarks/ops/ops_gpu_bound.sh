#!/usr/bin/env bash
# The ops dataset at GPU-bound batch sizes on this GPU: first how the metered windows read (the
# metering before against the metering now), then the grid, 6 models x 3 batch sizes x bf16/fp32 x
# training/inference, the middle batch size of every model first.
# Usage: OUT=<dir> bash benchmarks/ops/ops_gpu_bound.sh   (whole script under TOTAL_S seconds, default 560)
# RESUME=1 on the same machine goes on with the grid where the last call stopped (no benchmark, no GPU test);
# METERING=0 skips the metering benchmark; BATCHES replaces the batch sizes (--batches of radt_ext.ops.grid).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
: "${OUT:?set OUT to the output directory}"
TOTAL_S=${TOTAL_S:-560}
BATCHES=${BATCHES:-small_cnn=4096:8192:16384,mlp=16384:65536:131072,resnet18=128:256:384,resnet50=128:192:256,vit=128:256:384,dlrm=65536:131072:262144}
if [ "${RESUME:-0}" != 1 ] && [ "${METERING:-1}" = 1 ]; then
  timeout 150 python3 -m benchmarks.ops.ops_metering --repeats 2 --out $OUT/metering > $OUT/metering.log 2>&1
  echo "metering exit $? in ${SECONDS} s"; tail -n 40 $OUT/metering/ops_metering.md 2>/dev/null || tail -n 5 $OUT/metering.log
fi
[ "${RESUME:-0}" = 1 ] && GPU_TESTS=0
TOTAL_S=$((TOTAL_S - SECONDS)) GPU_TESTS=${GPU_TESTS:-1} MARGIN_S=${MARGIN_S:-30} \
  GRID_ARGS="--models small_cnn,mlp,resnet18,resnet50,vit,dlrm --extra= --batches $BATCHES ${GRID_ARGS:-}" \
  bash benchmarks/ops/ops_profile.sh
