#!/usr/bin/env bash
# What radt-ext counts in unmodified scripts when it is installed WITHOUT -e (its wheel, in a --target
# folder; the checkout nowhere on the path), on a GPU: a tensor-fed training loop (examples/unmodified/
# gru_train.py), a decoder whose loop steps through its layers itself (layer_decode.py: batch 4, 50
# sequences of 128 tokens), a DataLoader training run (loader_train.py) and, while time is left, a
# tensor-fed mixed-precision CNN whose GradScaler skips steps (cnn_train.py); each under `radt-ext run`,
# its count against the script's own (the last line of its output). Run from the repository root, with
# .whl/ holding MLflow's client and plotly wheels and radt-ext's wheel built from this checkout first:
#
#   rm -rf build && python3 -m pip wheel --no-deps --no-build-isolation -w .whl .
#   RESULTS=<dir> bash benchmarks/progress/count_proof.sh
#
# Files in $RESULTS: log.txt (what ran, and where radt_ext was imported from), machine.txt, <job>.log
# (radt-ext's and the script's output), mlflow.db (the store), summary.json and count_proof.md
# (benchmarks/progress/count_proof.py). Reads the GPU only; never changes MIG, clocks or limits. Expected
# wall time on an H100: about 60-80 s (the budget is 90 s: cnn_train is left out past CNN_BEFORE_S).
# DRY=1: the same flow on the CPU (tiny sizes, NVML replayed from a recorded trace); WHEELS=<dir> holds
# radt-ext's wheel instead of .whl/ (MLflow then comes from the environment), SITE=<dir> the target.
set -u
. benchmarks/gpu_lib.sh  # REPO; say, gpu_results, gpu_machine
DRY=${DRY:-0}
WHEELS=${WHEELS:-$REPO/.whl}
gpu_results "$(realpath -m "${RESULTS:-/tmp/count-proof-results}")" log.txt
W=$(mktemp -d /tmp/count-proof.XXXXXX)
SITE=${SITE:-/tmp/site}
[ "$DRY" = 1 ] && SITE=${SITE_DRY:-$W/site}

if ! ls "$WHEELS"/radt_ext-*.whl >/dev/null 2>&1; then
  say "no radt-ext wheel in $WHEELS; build it first: rm -rf build && python3 -m pip wheel --no-deps --no-build-isolation -w .whl ."
  exit 2
fi
say "wheels: $(cd "$WHEELS" && ls *.whl | tr '\n' ' ')"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
  || { say "pip install --target $SITE failed"; exit 2; }
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1  # the installed wheel only: not the checkout
export MLFLOW_TRACKING_URI="sqlite:///$RESULTS/mlflow.db" RADT_EXT_SPOOL_DIR="$W/spool" HOME="$W/home"
unset MLFLOW_RUN_ID MLFLOW_EXPERIMENT_ID MLFLOW_EXPERIMENT_NAME RADT_EXT_ACTIVE RADT_EXT_NO_PROGRESS
cd "$W" || exit 2  # outside the checkout: `python3 -m` puts the working directory first on sys.path
FROM=$(python3 -c 'import radt_ext; print(radt_ext.__file__)')
say "radt_ext imported from $FROM"
case "$FROM" in
  "$SITE"/*) ;;
  *) say "radt_ext does not come from the installed wheel in $SITE: stopping"; exit 2 ;;
esac

GRU="--batch 32 --steps 600"
DECODE="--batch 4 --sequences 50 --tokens 128"
LOADER="--workers 4 --batches 200 --batch 64"
CNN="--batch 128 --steps 1200"
CNN_BEFORE_S=${CNN_BEFORE_S:-55}
if [ "$DRY" = 1 ]; then
  export RADT_EXT_NVML_REPLAY=${RADT_EXT_NVML_REPLAY:-$REPO/listeners/traces/h200_matmul.json} OMP_NUM_THREADS=1
  GRU="--batch 8 --steps 40 --device cpu --tiny"
  DECODE="--batch 2 --sequences 3 --tokens 16 --device cpu --tiny"
  LOADER="--workers 1 --batches 8 --batch 16 --device cpu --tiny"
  CNN="--batch 8 --steps 10 --device cpu --tiny"
  CNN_BEFORE_S=${DRY_CNN_BEFORE_S:-600}
fi
gpu_machine "$RESULTS/machine.txt"
say "machine: $(sed -n 2p "$RESULTS/machine.txt")"

job() {  # job NAME SCRIPT ARGS...: the unmodified script under `radt-ext run` (every listener available)
  local name=$1 script=$2
  shift 2
  say "run: $name: examples/unmodified/$script $*"
  python3 -m radt_ext.cli run --experiment-name count-proof --run-name "$name" -- \
    python3 "$REPO/examples/unmodified/$script" "$@" > "$RESULTS/$name.log" 2>&1
  say "$name exited $?: $(grep -E '[0-9]+ (samples|tokens)' "$RESULTS/$name.log" | tail -1)"
}
job gru_train gru_train.py $GRU
job layer_decode layer_decode.py $DECODE
job loader_train loader_train.py $LOADER
if [ "$SECONDS" -lt "$CNN_BEFORE_S" ]; then
  job cnn_train cnn_train.py $CNN
else
  say "cnn_train: left out, $SECONDS s gone (budget 90 s)"
fi
python3 "$REPO/benchmarks/progress/count_proof.py" --store "$MLFLOW_TRACKING_URI" --logs "$RESULTS" \
  --out "$RESULTS" --radt-ext-file "$FROM" --repo "$REPO" | tee -a "$RESULTS/log.txt"
echo "==== ${SECONDS}s"
