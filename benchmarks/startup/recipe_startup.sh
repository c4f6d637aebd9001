#!/usr/bin/env bash
# How soon the synthetic cnn_amp recipe (synthetic32, bf16, batch 256) reaches its first training step on one
# GPU, from its process start, and where the time goes (import, CUDA context, data, model, optimizer, first
# forward, rest of the first step): small_cnn and resnet18, the workload alone (radt-ext's own start-up is not
# the recipe's), each model twice (the first process also pays a cold file cache). ~15 s a run.
# Run from the repository root: RESULTS=<dir> [BUDGET_S=80] bash benchmarks/startup/recipe_startup.sh
# Writes $RESULTS/startup.{json,md}, startup_<model>_<n>.log and the small mlflow.db. Reads the GPU only.
# DRY=1: the same flow on the CPU with tiny settings (proves arguments and paths only).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
RESULTS=${RESULTS:-/tmp/recipe-startup-results}
BUDGET_S=${BUDGET_S:-80}
mkdir -p "$RESULTS"
gpu_work "$(mktemp -d /tmp/recipe-startup.XXXXXX)"  # its spool; part NAME LIMIT cmd... logs here
export MLFLOW_TRACKING_URI=sqlite:///$RESULTS/mlflow.db
rm -f "$RESULTS/mlflow.db"
SIZE=(--batch-size 256 --train-samples 4096 --val-samples 256)
CAP=20  # seconds a run may take (start-up, one short epoch, the end)
gpu_dry h200_matmul.json && { SIZE=(--device cpu --batch-size 32 --train-samples 64 --val-samples 32 --width 4); CAP=120; }
echo "== recipe start-up, budget ${BUDGET_S}s, results in $RESULTS"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1
for n in 1 2; do
  for model in small_cnn resnet18; do
    left=$((BUDGET_S - SECONDS - 8))  # 8 s kept for the table
    if [ $left -lt 10 ]; then echo "SKIP startup_${model}_$n: only $left s left"; continue; fi
    part "startup_${model}_$n" $((left > CAP ? CAP : left)) \
      python3 -m radt_ext.workloads.torch_train --recipe cnn_amp --variant amp --precision bf16 --model "$model" \
        --dataset synthetic32 --epochs 1 --infer-iters 2 "${SIZE[@]}"
    grep "first step" "$W/startup_${model}_$n.log" || { echo "FAILED startup_${model}_$n:"; tail -n 5 "$W/startup_${model}_$n.log"; }
    cp "$W/startup_${model}_$n.log" "$RESULTS/" 2>/dev/null
  done
done
timeout 20 python3 - "$MLFLOW_TRACKING_URI" "$RESULTS" <<'PY' || echo "FAILED: the startup table"
import json, sys
from mlflow.tracking import MlflowClient
client, out = MlflowClient(sys.argv[1]), sys.argv[2]
rows = []
runs = client.search_runs([e.experiment_id for e in client.search_experiments()], order_by=["attributes.start_time ASC"])
for r in runs:
    m = r.data.metrics
    if "startup_to_first_step_s" in m:
        rows.append({"model": r.data.params.get("model"), "device": r.data.params.get("device_name"),
                     "torch": r.data.params.get("torch_version"),
                     **{k: m[k] for k in sorted(m) if k.startswith("startup_")}})
json.dump(rows, open(f"{out}/startup.json", "w"), indent=1)
phases = ["import", "device", "data", "model", "optimizer", "first_forward", "first_step"]
lines = ["| model | " + " | ".join(phases) + " | to first step | within 5 s |", "|---" * (len(phases) + 3) + "|"]
lines += [f"| {x['model']} | " + " | ".join(f"{x.get(f'startup_{p}_s', float('nan')):.2f}" for p in phases)
          + f" | {x['startup_to_first_step_s']:.2f} | {x['startup_to_first_step_s'] <= 5.0} |" for x in rows]
lines.append("\nseconds from the workload's process start, in run order; device: "
             + ", ".join(sorted({f"{x['device']} (torch {x['torch']})" for x in rows})))
open(f"{out}/startup.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
rm -rf "$W"
echo "== done in ${SECONDS}s"
