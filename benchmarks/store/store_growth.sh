#!/usr/bin/env bash
# What one GPU run at default settings puts into the tracking store (run from the repository root):
#   RESULTS=<dir> RUN_S=600 bash benchmarks/store/store_growth.sh
# One `radt-ext run` with no listener options (every listener available on the host, at its default
# interval; the store's default shape) of a real training workload (the cnn_amp recipe's entry: ResNet-18,
# synthetic32, bf16, batch 256, epochs of 32768 samples with a validation pass each) on GPU 0, stopped with
# SIGINT after RUN_S seconds (the run ends KILLED, with its summaries, tags and timeline artifact like any
# other). Returns the SQLite store (mlflow.db.xz), the run's full-rate timeline artifact (system.parquet),
# the run's log and the machine. The "before" figures come from these on a machine with PostgreSQL:
#   python -m benchmarks.store.store_growth --store sqlite:///DIR/mlflow.db --timelines DIR/system.parquet --out docs/benchmarks/gpu/store_growth
# (the full-rate points logged again through the old path, `--full-rate-store`, into SQLite and PostgreSQL).
# Reads the GPU only; never changes MIG, clocks or limits.
# Expected wall time: RUN_S + ~25 s (versions, the run's end, compression). A 10-minute run outlasts one
# 600 s device command: start it detached (`setsid nohup env RESULTS=… RUN_S=600 bash … &`), then collect
# RESULTS in a second command once its output ends with "====".
# DRY=1: the same flow on the CPU with the NVML replay backend and a tiny fp32 training (RUN_S default 40).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
TRAIN="python3 -m radt_ext.workloads.torch_train --model resnet18 --dataset synthetic32 --epochs 1000 --infer-iters 1"
if gpu_dry h200_matmul.json; then  # fp32 on the CPU: bf16 autocast crawls without bf16 instructions
  RUN_S=${RUN_S:-40}
  TRAIN="$TRAIN --recipe cnn_baseline --variant baseline --device cpu --precision fp32 --batch-size 16 --train-samples 256 --val-samples 32"
else
  RUN_S=${RUN_S:-600}
  TRAIN="$TRAIN --recipe cnn_amp --variant amp --precision bf16 --batch-size 256 --train-samples 32768 --val-samples 512"
fi
gpu_results "${RESULTS:-/tmp/store-growth-results}" log.txt
rm -f "$RESULTS"/mlflow.db.xz "$RESULTS"/system.parquet "$RESULTS"/run.log
gpu_work "$(mktemp -d /tmp/store-growth.XXXXXX)"  # its store and spool
unset RADT_EXT_FULL_RATE_STORE
gpu_machine "$RESULTS/machine.txt" index,name,memory.total,driver_version,mig.mode.current,power.limit
say "machine: $(sed -n 2p "$RESULTS/machine.txt")"

cd "$W"
say "run: $RUN_S s of training at default settings"
CUDA_VISIBLE_DEVICES=0 timeout -s INT -k 60 "$RUN_S" python3 -m radt_ext.cli run --experiment-name store-growth \
  --run-name "store growth ${RUN_S}s" -- $TRAIN > "$RESULTS/run.log" 2>&1
say "run exited $? (124: stopped at RUN_S, as meant): $(grep -E 'radt-ext: run [0-9a-f]+ (FINISHED|FAILED|KILLED)' "$RESULTS/run.log" | tail -1)"
cd "$REPO"
ART=$(find "$W" -path '*/artifacts/timelines/system.parquet' | head -1)
if [ -n "$ART" ]; then cp "$ART" "$RESULTS/system.parquet"; say "timeline artifact: $(du -k "$ART" | cut -f1) KiB"
else say "NO timeline artifact found under $W"; fi
say "store: $(du -k "$W/mlflow.db" | cut -f1) KiB; rows: $(python3 -c "
import sqlite3, sys; c = sqlite3.connect(sys.argv[1])
print(c.execute('select count(*), sum(key like \"system/%\") from metrics').fetchone())" "$W/mlflow.db")"
gpu_keep_store 1000000  # the store, compressed, whatever its size
echo "==== ${SECONDS}s"; cat "$RESULTS/log.txt"; tail -5 "$RESULTS/run.log"
