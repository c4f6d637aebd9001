#!/usr/bin/env bash
# Proof on one GPU (run from the repository root; RESULTS and BUDGET_S set by the caller, ~60 s):
#  (a) a 12 s bf16 matmul load under `radt-ext run -l nvml,top` whose script opens a 3 s and a 6 s run of
#      its own: each run's summary/e2e_gpu_total_energy_j (counter) against the integral of the driver's power
#      samples over its span, and gpu0_energy_j's points a second (>= 1) between the counter's reads;
#  (b) the synthetic cnn_amp recipe's time to its first training step and its split (import, CUDA
#      context, data, model, first step), for small_cnn and resnet18 on synthetic32.
# Writes energy_timeline.{json,md}, startup.{json,md}, the logs and the small mlflow.db into $RESULTS.
# Reads the GPU only; never changes its settings.
# DRY=<trace.json>: the same flow on the CPU with the NVML replay (proves arguments and paths only).
set -u
RESULTS=${RESULTS:-/tmp/energy-timeline-results}
BUDGET_S=${BUDGET_S:-60}
mkdir -p "$RESULTS"
W=$(mktemp -d /tmp/energy-timeline.XXXXXX)
source scripts/gpu/batch_lib.sh  # W fresh, its store and spool; the replay only for DRY; part NAME LIMIT cmd...
export MLFLOW_TRACKING_URI=sqlite:///$RESULTS/mlflow.db PYTHONUNBUFFERED=1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD  # the scripts run as files import radt_ext from this checkout
# Not installed there: put radt-ext's entry points on the path, so MLflow loads its run context provider and
# the runs the workload opens are tagged as its own (else they get no energy).
if ! python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.value.startswith('radt_ext.') for e in m.entry_points(group='mlflow.run_context_provider')))" 2>/dev/null; then
  mkdir -p "$W/meta/radt_ext-0.dist-info"
  printf 'Metadata-Version: 2.1\nName: radt-ext\nVersion: 0\n' > "$W/meta/radt_ext-0.dist-info/METADATA"
  sed -n '/^\[options.entry_points\]/,/^\[/p' setup.cfg | sed '1d;$d' | awk '/^[^ ]/{sub(/ *=$/,""); print "[" $0 "]"; next} NF{sub(/^ +/,""); print}' \
    > "$W/meta/radt_ext-0.dist-info/entry_points.txt"
  export PYTHONPATH=$PYTHONPATH:$W/meta
fi
rm -f "$RESULTS/mlflow.db"
DEVICE=()
[ -n "${DRY:-}" ] && DEVICE=(--device cpu --precision fp32 --variant baseline --recipe cnn_baseline --batch-size 32 --train-samples 256 --val-samples 64)
echo "== energy timeline proof, budget ${BUDGET_S}s, results in $RESULTS"

# (a) ~25 s: radt-ext's and the workload's start-up, 12 s of load, the end
part energy_runs 45 python3 -m radt_ext.cli run -l nvml,top --experiment-name energy-spans --run-name matmul12 -- \
  python3 scripts/gpu/energy_runs_workload.py --seconds 12 --run three:2:3 --run six:5.5:6
cp "$W/energy_runs.log" "$RESULTS/" 2>/dev/null
part energy_check 20 python3 scripts/gpu/energy_check.py "$MLFLOW_TRACKING_URI" "$RESULTS"
cat "$W/energy_check.log"; cp "$W/energy_check.log" "$RESULTS/" 2>/dev/null

# (b) the recipe's start-up, the workload alone (radt-ext's own start-up is not the recipe's)
for model in small_cnn resnet18; do
  if [ $((BUDGET_S - SECONDS)) -lt 12 ]; then echo "SKIP startup_$model: only $((BUDGET_S - SECONDS)) s left"; continue; fi
  part "startup_$model" $((BUDGET_S - SECONDS > 40 ? 40 : BUDGET_S - SECONDS)) \
    python3 -m radt_ext.workloads.torch_train --recipe cnn_amp --variant amp --precision bf16 --model "$model" \
      --dataset synthetic32 --batch-size 256 --epochs 1 --train-samples 4096 --val-samples 256 --infer-iters 2 "${DEVICE[@]}"
  grep "first step" "$W/startup_$model.log" || tail -3 "$W/startup_$model.log"
  cp "$W/startup_$model.log" "$RESULTS/" 2>/dev/null
done
python3 - "$MLFLOW_TRACKING_URI" "$RESULTS" <<'PY'
import json, sys
from mlflow.tracking import MlflowClient
client, out = MlflowClient(sys.argv[1]), sys.argv[2]
rows = []
for r in client.search_runs([e.experiment_id for e in client.search_experiments()]):
    m = r.data.metrics
    if "startup_to_first_step_s" in m:
        rows.append({"model": r.data.params.get("model"), "device": r.data.params.get("device_name"),
                     **{k: m[k] for k in sorted(m) if k.startswith("startup_")}})
json.dump(rows, open(f"{out}/startup.json", "w"), indent=1)
phases = ["import", "device", "data", "model", "optimizer", "first_forward", "first_step"]
lines = ["| model | " + " | ".join(phases) + " | to first step | within 5 s |", "|---" * (len(phases) + 3) + "|"]
lines += [f"| {x['model']} | " + " | ".join(f"{x.get(f'startup_{p}_s', float('nan')):.2f}" for p in phases)
          + f" | {x['startup_to_first_step_s']:.2f} | {x['startup_to_first_step_s'] <= 5.0} |" for x in rows]
lines.append("\nseconds from the workload's process start; device: " + ", ".join({str(x['device']) for x in rows}))
open(f"{out}/startup.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "== done in ${SECONDS}s"
