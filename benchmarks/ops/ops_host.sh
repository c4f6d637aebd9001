#!/usr/bin/env bash
# The host-aware per-operation predictor's data from one GPU machine, and how well a measurement repeats there:
#   1. host:    this machine's host benchmark (launch, dispatch, module call, autograd step, small copies; CPU
#               model and clock): `radt-ext ops host`;
#   2. repeat1: the held-out suite's repeat set (Encoder b64 and Decoder b32, bf16, training and inference),
#               profiled with the profiler's controls (launching and meter threads pinned to CPUs of their own,
#               sparse counter reads, no garbage collection inside a window) and its per-round host record;
#   3. suite2:  the second suite (examples/unseen: 6 networks written after the predictor was chosen) x
#               bf16/fp32 x training/inference, bf16 first: what does not fit the budget is skipped;
#   4. repeat2: the repeat set again, in a fresh process: the same configuration twice on one machine.
# Run on an H100 machine and on an H200 machine; `python -m benchmarks.ops.ops_host report` turns both into the figures.
# Output in $RESULTS: host.json, suite2|repeat1|repeat2.csv.gz (ops datasets), rounds.csv.gz, profiles/ (raw,
# written as each profile completes), env.txt, nvidia-smi before/after, logs.
# Usage: RESULTS=<dir> BUDGET_S=240 bash benchmarks/ops/ops_host.sh        (at most BUDGET_S + about 5 s)
# Dry run on the CPU: DRY=1 (two networks of the second suite at batch 2, two small modules of the tests as the
# repeat set, short windows, fp32; about 2 minutes on two shared cores).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
RESULTS=${RESULTS:?set RESULTS to a folder}
BUDGET_S=${BUDGET_S:-240}
MARGIN_S=${MARGIN_S:-12}  # kept for packing up
REPEAT_S=${REPEAT_S:-48}  # grid budget of each repeat (about 35 s of profiles on an H100)
STARTUP_S=${STARTUP_S:-10}  # a grid process's start before its budget runs (torch, CUDA, NVML)
P=$RESULTS/profiles
rm -rf $P
mkdir -p $P/suite2 $P/repeat1 $P/repeat2
LOG=$RESULTS/ops_host.log

if [ "${DRY:-0}" = 1 ]; then
  SUITE_ARGS="--models examples.unseen.graph:GraphNet,examples.unseen.mixer:Mixer --extra= --batches examples.unseen.graph:GraphNet=2,examples.unseen.mixer:Mixer=2 --guess-s 3"
  REPEAT_ARGS="$GRID_DRY_SET --precisions fp32"
  PRECISIONS=fp32
  DEVICE="--device cpu"
else
  SUITE_ARGS="$(timeout 60 python3 -m benchmarks.ops.ops_host grid-args) --guess-s 7"
  REPEAT_ARGS="--models examples.heldout.encoder:Encoder,examples.heldout.decoder:Decoder --extra= --batches examples.heldout.encoder:Encoder=64,examples.heldout.decoder:Decoder=32 --precisions bf16 --guess-s 12"
  PRECISIONS=bf16,fp32
  DEVICE=""
  (timeout 20 nvidia-smi; timeout 20 nvidia-smi -q) > $RESULTS/nvidia-smi-before.txt 2>&1
fi
gpu_machine $RESULTS/env.txt
cat $RESULTS/env.txt | tee -a $LOG
say "start: budget ${BUDGET_S} s"

timeout 60 python3 -m radt_ext.cli ops host $DEVICE --out $RESULTS/host.json 2>&1 | tee -a $LOG

gpu_grid repeat1 $REPEAT_S $REPEAT_ARGS --modes training,inference
gpu_grid suite2 $((BUDGET_S - SECONDS - 2 * STARTUP_S - REPEAT_S - MARGIN_S)) $SUITE_ARGS --precisions $PRECISIONS --modes training,inference
gpu_grid repeat2 $((BUDGET_S - SECONDS - STARTUP_S - MARGIN_S)) $REPEAT_ARGS --modes training,inference

gpu_grid_pack 4000 suite2 repeat1 repeat2
