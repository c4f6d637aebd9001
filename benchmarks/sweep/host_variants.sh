#!/usr/bin/env bash
# CPUs and environment of a host-bound training on the GPU host (run from the repository root):
#   RESULTS=<dir> bash benchmarks/sweep/host_variants.sh
# Runs examples/sweeps/host_variants.yaml without its governor group: a training its DataLoader holds back
# (examples/host_variants/loader_train.py, 6 loader workers, 200 steps of 64 images on GPU 0) pinned to
# 2, 4 and 8 CPUs near GPU 0 (radt-ext's `system: {cpus: ...}`), each with OMP_NUM_THREADS 1 and 4: six
# variants. Sets CPUs and environment only: never the governor, GPU clocks, power limits, MIG or compute mode.
# Returns the sweep's results table (results.csv: makespan and active seconds per variant, its system
# settings), the sweep's log (every workload's CPUs as the kernel reported them, each loader worker's too),
# the spec it ran, the store (mlflow.db.xz, with each run's system.* tags) and the machine (CPUs, NUMA,
# the GPU's CPU affinity).
# Expected wall time: about 2.5 minutes (six variants of 5..25 s, plus a few seconds each to start).
# DRY=1: the same flow on the CPU with the NVML replay backend: 1 and 2 CPUs, 2 loader workers, 6 steps
# (about 2 minutes on a 2-CPU machine).
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
if gpu_dry h200_matmul.json; then
  CPUS="[1, 2]" STEPS=6 WORKERS=2
else
  CPUS="[2, 4, 8]" STEPS=200 WORKERS=6
fi
gpu_results "${RESULTS:-/tmp/host-variants-results}" log.txt
rm -f "$RESULTS"/results.csv "$RESULTS"/sweep.log "$RESULTS"/mlflow.db.xz "$RESULTS"/spec.yaml
gpu_work "$(mktemp -d /tmp/host-variants.XXXXXX)"  # its store and spool
export RADT_EXT_HOSTSETTINGS_DIR="$W/hs"
unset CUDA_VISIBLE_DEVICES

# the example without its governor group (the lent host's CPU settings stay as they are)
python3 - "$REPO/examples/sweeps/host_variants.yaml" "$RESULTS/spec.yaml" "$CPUS" "$STEPS" "$WORKERS" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))
spec["groups"] = [g for g in spec["groups"] if "governor" not in g.get("system", {})]
spec["system"]["cpus"] = yaml.safe_load(sys.argv[3])
spec["workloads"]["loader"]["params"].update(steps=int(sys.argv[4]), workers=int(sys.argv[5]))
assert not any(k.startswith("gpu_") or k in ("governor", "cpu_quota_pct") for k in spec["system"]), spec
yaml.safe_dump(spec, open(sys.argv[2], "w"), sort_keys=False)
PY
gpu_machine "$RESULTS/machine.txt" index,name,driver_version,power.limit,clocks.max.sm
nvidia-smi topo -m 2>/dev/null | head -4 >> "$RESULTS/machine.txt"
say "machine: $(grep -m1 '^cpus' "$RESULTS/machine.txt" | cut -c1-70)"
say "sweep: cpus $CPUS x OMP_NUM_THREADS [1, 4], $STEPS steps each"
python3 -m radt_ext.cli sweep "$RESULTS/spec.yaml" > "$RESULTS/sweep.log" 2>&1
say "sweep exited $?"
# the results table again, read back from the store (every variant FINISHED: nothing runs), as CSV
python3 -m radt_ext.cli sweep "$RESULTS/spec.yaml" --output csv > "$RESULTS/results.csv" 2>> "$RESULTS/sweep.log"
say "the workloads' CPUs (train: as the kernel told the training; loader workers: its processes)"
grep -E '^train: cpus|loader worker 0|^train: [0-9]+ steps' "$RESULTS/sweep.log" | tee -a "$RESULTS/log.txt"
python3 - "$W/mlflow.db" <<'PY' | tee -a "$RESULTS/log.txt"
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(f"sqlite:///{sys.argv[1]}")
runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
print("cpus asked | cpus the kernel gave | OMP_NUM_THREADS | how chosen | e2e s | status")
for r in sorted(runs, key=lambda r: r.data.tags.get("mlflow.runName", "")):
    t = r.data.tags
    if "mlflow.parentRunId" in t or "system.cpus" not in t:
        continue
    print(f"{t['system.cpus']} | {t.get('system.cpus.host')} | {t.get('system.env.OMP_NUM_THREADS')} | "
          f"{t.get('system.cpus.status')} | {r.data.metrics.get('summary/e2e_duration_s', float('nan')):.2f} | {r.info.status}")
PY
gpu_keep_store 1000000  # the store, compressed, with each run's system.* tags
echo "==== ${SECONDS}s"; cat "$RESULTS/log.txt"; cat "$RESULTS/results.csv"
