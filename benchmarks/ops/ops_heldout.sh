#!/usr/bin/env bash
# The per-operation predictor's held-out suite on this GPU, with what may move each measurement:
#   1. suite:   8 networks outside the catalog's families (examples/heldout) x training/inference x bf16/fp32
#               = 32 profiles, bf16 first, each network measured in 5 rounds spread over its profile;
#   2. repeat:  4 of them profiled again (a fresh process): the same configuration twice on one machine;
#   3. dataset: 4 configurations of docs/ops/dataset.csv.gz profiled again: the same configuration on
#               another machine of the same kind.
# Every round records the SM and memory clocks, performance state, temperature, power and throttle reasons
# before its window and inside it; every profile its warm-up and cuDNN/cuBLAS settings.
# Output in $RESULTS: suite|repeat|dataset.csv.gz (ops datasets), rounds.csv.gz, profiles/ (raw, written as
# each profile completes, so a run cut short keeps them), nvidia-smi before/after, logs.
# Usage: RESULTS=<dir> BUDGET_S=540 bash benchmarks/ops/ops_heldout.sh
# RESUME=1 on the same machine keeps the profiles already in $RESULTS/profiles and goes on.
# Dry run on the CPU: DRY=1 (two small modules of the tests, short windows, fp32).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
RESULTS=${RESULTS:?set RESULTS to a folder}
BUDGET_S=${BUDGET_S:-540}
MARGIN_S=${MARGIN_S:-35}  # kept for packing up
GRID_MIN_S=15  # a grid call given less is skipped
P=$RESULTS/profiles
mkdir -p $RESULTS
[ "${RESUME:-0}" = 1 ] || rm -rf $P
mkdir -p $P/suite $P/repeat $P/dataset
LOG=$RESULTS/ops_heldout.log

if [ "${DRY:-0}" = 1 ]; then
  SUITE_ARGS=$GRID_DRY_SET  # users' modules small enough for a shared CPU: keyword inputs (a dict), two positional ones
  REPEAT_ARGS="--models tests.radt_ext.ops.modules:TokensAndMask --extra= --batches tests.radt_ext.ops.modules:TokensAndMask=4 --precisions fp32"
  DATASET_ARGS="--tiny --models mlp --extra= --batches mlp=4 --precisions fp32"
  PRECISIONS=fp32
else
  SUITE_ARGS=$(timeout 60 python3 -m benchmarks.ops.ops_heldout grid-args)
  [ -n "$SUITE_ARGS" ] || { echo "the suite's grid arguments failed: python3 -m benchmarks.ops.ops_heldout grid-args"; exit 1; }
  REPEAT_ARGS="--models examples.heldout.encoder:Encoder,examples.heldout.decoder:Decoder --extra= --batches examples.heldout.encoder:Encoder=64,examples.heldout.decoder:Decoder=32 --precisions bf16"
  DATASET_ARGS="--models vit,mlp --extra= --batches vit=256,mlp=65536 --precisions bf16"
  PRECISIONS=bf16,fp32
  (timeout 20 nvidia-smi; timeout 20 nvidia-smi -q) > $RESULTS/nvidia-smi-before.txt 2>&1
fi
gpu_machine $RESULTS/env.txt
cat $RESULTS/env.txt | tee -a $LOG
say "start: budget ${BUDGET_S} s"

# the suite gets what the two repeats (about 30 s each on an H100) and the packing leave
REPEATS_S=${REPEATS_S:-100}
gpu_grid suite $((BUDGET_S - SECONDS - REPEATS_S - MARGIN_S)) $SUITE_ARGS --precisions $PRECISIONS --modes training,inference
gpu_grid repeat $((BUDGET_S - SECONDS - MARGIN_S - REPEATS_S / 2)) $REPEAT_ARGS --modes training,inference
gpu_grid dataset $((BUDGET_S - SECONDS - MARGIN_S)) $DATASET_ARGS --modes training,inference

gpu_grid_pack 6000 suite repeat dataset
