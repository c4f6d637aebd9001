#!/usr/bin/env bash
# Each job's own energy on a shared GPU, on a 2-GPU node (nvidia-h100-x2), both GPUs at once:
#   RESULTS=<dir> BUDGET_S=200 bash benchmarks/collocation/attribution_pairs.sh
# One `radt-ext sweep` over a pool of both GPUs (parent listener nvml:0.1, children top + gpu_procs:0.1),
# REPEATS (default 3) repeats of: identical pairs of bf16 matmul 4096² and 8192² (4 s each, time-bound) and
# of a small CNN at batch 32 (launch-bound, 1500 steps or 6 s), each naive (time-slicing) and under MPS; and
# the unequal pair (naive): matmul 8192² doing 1200 products beside the same doing 2400. The jobs are a
# user's script (benchmarks/collocation/attribution_load.py: torch, no MLflow import, work reported with
# radt_ext.log_progress), ~10 s each with start-up. Beside the sweep, every raw NVML per-process sample
# of both GPUs (listeners.record_proc_samples, every 50 ms) and what a reader asking once a second gets
# (GPU 0), and whether NVML's accounting stats are readable with the card as it is (read only).
# Then benchmarks/collocation/attribution_pairs.py writes the tables (attribution_pairs.md/.json): per pair and
# repeat the two jobs' attributed energy, their gap and intervals, the unequal pair's split against its
# work, and the driver's ticks (how many, one process each, runs, what a once-a-second reader keeps).
# Reads the GPUs only; never changes MIG, clocks, limits or the compute or accounting mode.
# DRY=1: the same flow on the CPU (NVML replayed from the derived 2-GPU trace, tiny CPU jobs, the stand-in
# MPS daemon); it proves the commands and paths, not any GPU figure.
# Expected wall time on 2 H100s: ~150 s (21 groups, 10-11 on each GPU at ~11 s each, the analysis ~15 s);
# the sweep is capped so the whole stays inside BUDGET_S.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
BUDGET_S=${BUDGET_S:-200}
REPEATS=${REPEATS:-3}
LOAD="python3 $REPO/benchmarks/collocation/attribution_load.py"
if gpu_dry h200x2_derived.json; then
  MM_S=1; SMALL=256; LARGE=384; CNN="cnn --batch 8 --steps 30 --seconds 2"; PRODUCTS=40
else
  MM_S=4; SMALL=4096; LARGE=8192; CNN="cnn --batch 32 --steps 1500 --seconds 6"; PRODUCTS=1200
fi
gpu_results "${RESULTS:-/tmp/attribution_pairs_results}"
gpu_work /tmp/attribution_pairs  # made fresh: its store and spool
gpu_mps "$W/mps"  # private MPS folders; the stand-in daemon in a dry run
gpu_machine "$RESULTS/machine.txt" index,name,memory.total,driver_version,mig.mode.current,compute_mode,accounting.mode \
  &  # beside the sweep
say "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -2 | tr '\n' ' ')"

cat > "$W/pairs.yaml" <<YAML
name: attribution-pairs
devices: ["0", "1"]
listeners: nvml:0.1
child_listeners: top:0.5,gpu_procs:0.1
repeats: $REPEATS
workloads:
  mm$SMALL: {command: "$LOAD matmul --size $SMALL --seconds $MM_S"}
  mm$LARGE: {command: "$LOAD matmul --size $LARGE --seconds $MM_S"}
  cnn: {command: "$LOAD $CNN"}
  once: {command: "$LOAD matmul --size $LARGE --products $PRODUCTS"}
  twice: {command: "$LOAD matmul --size $LARGE --products $((2 * PRODUCTS))"}
groups:  # naive first, MPS (split evenly, within 0.5 % before) last: a sweep cut short loses the least
  - {workloads: [mm$SMALL, mm$SMALL], modes: [naive]}
  - {workloads: [mm$LARGE, mm$LARGE], modes: [naive]}
  - {workloads: [cnn, cnn], modes: [naive]}
  - {workloads: [once, twice], modes: [naive]}
  - {workloads: [mm$SMALL, mm$SMALL], modes: [mps]}
  - {workloads: [mm$LARGE, mm$LARGE], modes: [mps]}
  - {workloads: [cnn, cnn], modes: [mps]}
YAML
cp "$W/pairs.yaml" "$RESULTS/"

cd "$W"
for gpu in 0 1; do
  python3 -m listeners.record_proc_samples --gpu $gpu --interval 0.05 --out "$W/raw_gpu$gpu.jsonl" \
    > "$W/recorder_gpu$gpu.log" 2>&1 &
  echo $! >> "$W/recorders.pid"
done
python3 -m listeners.record_proc_samples --gpu 0 --interval 1.0 --out "$W/raw_gpu0_1s.jsonl" \
  > "$W/recorder_gpu0_1s.log" 2>&1 &
echo $! >> "$W/recorders.pid"
LIMIT=$((BUDGET_S - SECONDS - 45)); [ "$LIMIT" -gt 170 ] && LIMIT=170  # 45 s: the recorders' end, accounting, analysis
say "sweep: $(grep -c '^  - ' "$W/pairs.yaml") groups x $REPEATS repeats on GPUs 0 and 1 (limit ${LIMIT}s)"
COLUMNS=200 timeout -k 10 "$LIMIT" python3 -m radt_ext.cli sweep "$W/pairs.yaml" > "$RESULTS/sweep.log" 2>&1
say "sweep exited $?: $(grep -c 'FINISHED, makespan' "$RESULTS/sweep.log") groups FINISHED"
kill -TERM $(cat "$W/recorders.pid") 2>/dev/null; wait
gpu_mps_left
cat "$W"/recorder_*.log >> "$RESULTS/steps.log"
# accounting stats, read only: the mode as the card has it, and what a query of the jobs' pids answers
timeout 10 python3 - "$W" > "$RESULTS/accounting.json" 2>&1 <<'PY'
import json, sys
from listeners.nvml_backend import nvml
nv = nvml(); nv.nvmlInit(); out = {}
for gpu in (0, 1):
    h = nv.nvmlDeviceGetHandleByIndex(gpu); row = {}
    try:
        row["mode"] = int(nv.nvmlDeviceGetAccountingMode(h))
    except Exception as exc:
        row["mode"] = f"{type(exc).__name__}: {exc}"
    pids = sorted({json.loads(l)["pid"] for l in open(f"{sys.argv[1]}/raw_gpu{gpu}.jsonl") if '"proc"' in l})[:4]
    for pid in pids:
        try:
            s = nv.nvmlDeviceGetAccountingStats(h, pid)
            row[str(pid)] = {"gpuUtilization": s.gpuUtilization, "time_ms": s.time}
        except Exception as exc:
            row[str(pid)] = f"{type(exc).__name__}: {exc}"
    out[f"gpu{gpu}"] = row
print(json.dumps(out, indent=1))
PY
cd "$REPO"
timeout 30 python3 -m benchmarks.collocation.attribution_pairs --store "$MLFLOW_TRACKING_URI" --experiment attribution-pairs \
  --raw "$W/raw_gpu0.jsonl" "$W/raw_gpu1.jsonl" --once-a-second "$W/raw_gpu0_1s.jsonl" --out "$RESULTS" \
  > "$RESULTS/analysis.log" 2>&1 || say "analysis exited $?: $(tail -1 "$RESULTS/analysis.log")"
for f in raw_gpu0.jsonl raw_gpu1.jsonl raw_gpu0_1s.jsonl; do gzip -c "$W/$f" > "$RESULTS/$f.gz" 2>/dev/null; done
gpu_keep_store  # the store, for recomputing the split later
say "done"
echo "==== ${SECONDS}s"; cat "$RESULTS/steps.log"; cat "$RESULTS/analysis.log"
