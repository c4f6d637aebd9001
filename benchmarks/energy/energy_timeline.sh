#!/usr/bin/env bash
# Proof on one GPU (run from the repository root; RESULTS and BUDGET_S set by the caller, ~35 s):
# a 12 s bf16 matmul load under `radt-ext run -l nvml,top` whose script opens a 3 s and a 6 s run of
#      its own: each run's summary/e2e_gpu_total_energy_j (counter) against the integral of the driver's power
#      samples over its span, and gpu0_energy_j's points a second (>= 1) between the counter's reads;
# (The recipe's start-up is scripts/gpu/recipe_startup.sh.)
# Writes energy_timeline.{json,md}, the logs and the small mlflow.db into $RESULTS.
# Reads the GPU only; never changes its settings.
# DRY=<trace.json>: the same flow on the CPU with the NVML replay (proves arguments and paths only).
set -u
RESULTS=${RESULTS:-/tmp/energy-timeline-results}
BUDGET_S=${BUDGET_S:-35}
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
echo "== energy timeline proof, budget ${BUDGET_S}s, results in $RESULTS"

# ~25 s: radt-ext's and the workload's start-up, 12 s of load, the end
part energy_runs 45 python3 -m radt_ext.cli run -l nvml,top --experiment-name energy-spans --run-name matmul12 -- \
  python3 scripts/gpu/energy_runs_workload.py --seconds 12 --run three:2:3 --run six:5.5:6
cp "$W/energy_runs.log" "$RESULTS/" 2>/dev/null
part energy_check 20 python3 scripts/gpu/energy_check.py "$MLFLOW_TRACKING_URI" "$RESULTS"
cat "$W/energy_check.log"; cp "$W/energy_check.log" "$RESULTS/" 2>/dev/null

echo "== done in ${SECONDS}s"
