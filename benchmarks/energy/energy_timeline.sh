#!/usr/bin/env bash
# Proof on one GPU (run from the repository root; RESULTS and BUDGET_S set by the caller, ~35 s):
# a 12 s bf16 matmul load under `radt-ext run -l nvml,top` whose script opens a 3 s and a 6 s run of
#      its own: each run's summary/e2e_gpu_total_energy_j (counter) against the integral of the driver's power
#      samples over its span, and gpu0_energy_j's points a second (>= 1) between the counter's reads;
# (The recipe's start-up is benchmarks/startup/recipe_startup.sh.)
# Writes energy_timeline.{json,md}, the logs and the small mlflow.db into $RESULTS.
# Reads the GPU only; never changes its settings.
# DRY=1 (or DRY=<trace.json>): the same flow on the CPU with the NVML replay (proves arguments and paths only).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
BUDGET_S=${BUDGET_S:-35}
gpu_dry h200_matmul.json
RESULTS=${RESULTS:-/tmp/energy-timeline-results}; mkdir -p "$RESULTS"
gpu_work "$(mktemp -d /tmp/energy-timeline.XXXXXX)"  # its spool; the store goes with the results
export MLFLOW_TRACKING_URI=sqlite:///$RESULTS/mlflow.db
gpu_entry_points  # the runs the workload opens are tagged as its own (else they get no energy)
rm -f "$RESULTS/mlflow.db"
echo "== energy timeline proof, budget ${BUDGET_S}s, results in $RESULTS"

# ~25 s: radt-ext's and the workload's start-up, 12 s of load, the end
part energy_runs 45 python3 -m radt_ext.cli run -l nvml,top --experiment-name energy-spans --run-name matmul12 -- \
  python3 benchmarks/energy/energy_runs_workload.py --seconds 12 --run three:2:3 --run six:5.5:6
cp "$W/energy_runs.log" "$RESULTS/" 2>/dev/null
part energy_check 20 python3 benchmarks/energy/energy_check.py "$MLFLOW_TRACKING_URI" "$RESULTS"
cat "$W/energy_check.log"; cp "$W/energy_check.log" "$RESULTS/" 2>/dev/null

echo "== done in ${SECONDS}s"
