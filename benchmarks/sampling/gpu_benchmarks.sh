#!/usr/bin/env bash
# The benchmarks' GPU parts (1 overhead, 2 sampling capacity, 4 energy fidelity) on one H100/H200.
# Run from the repository root with $OUT set; needs .whl/ (MLflow's client) and .whl-extra/ (radT's wheel).
# Parts run in the order of $PARTS (default "4 2 1"); the overhead part takes the time left up to ~8 minutes.
# About 8 minutes; writes 8 files to $OUT: {overhead,sampling,energy_fidelity}.{json,md}, gpu_benchmarks.log, env.txt
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
: "${OUT:?set OUT to the output directory}"
main() {
gpu_wheels .whl-extra  # radT's wheel in .whl-extra/: without it the radt configuration reports 'not installed'
gpu_work /tmp/radt-bench
{ nvidia-smi; python3 -c "import torch, mlflow, pynvml, psutil; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'mlflow', mlflow.__version__, 'psutil', psutil.__version__)";
  python3 -m radt_ext.cli listeners; nproc; git log -1 --format='commit %H %s' 2>/dev/null; } > $OUT/env.txt 2>&1
python3 -c "import mlflow; mlflow.set_tracking_uri('$MLFLOW_TRACKING_URI'); mlflow.search_experiments()"  # create the store once

PARTS=${PARTS:-4 2 1}  # e.g. PARTS="2 1" to skip the energy fidelity run; OVERHEAD_CONFIGS=none,none-b,... picks configurations
for part in $PARTS; do case $part in
4) echo "== part 4: energy fidelity ($SECONDS s)"
   timeout 120 python3 -m benchmarks.energy.energy_fidelity --seconds 12 --out $OUT || echo "energy_fidelity exited $?" ;;
2) echo "== part 2: sampling capacity ($SECONDS s)"
   timeout 240 python3 -m benchmarks.sampling.sampling --max-rate-seconds 3 --seconds 6 --settle 1 --out $OUT || echo "sampling exited $?" ;;
1) BUDGET=$(( 470 - SECONDS - 45 )); [ $BUDGET -lt 60 ] && BUDGET=60
   echo "== part 1: overhead, budget $BUDGET s ($SECONDS s)"
   timeout $(( BUDGET + 75 )) python3 -m benchmarks.sampling.overhead --budget-s $BUDGET --window 2 --settle 1 --warmup 5 --batch 128 --out $OUT ${OVERHEAD_CONFIGS:+--configs $OVERHEAD_CONFIGS} \
     || echo "overhead exited $?" ;;
esac; done
echo "== done in $SECONDS s"; ls -la $OUT
}
main 2>&1 | tee $OUT/gpu_benchmarks.log
