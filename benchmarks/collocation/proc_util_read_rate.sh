#!/usr/bin/env bash
# What nvmlDeviceGetProcessUtilization returns when asked once a second (run from the repository root):
#   OUT=<dir> bash benchmarks/collocation/proc_util_read_rate.sh
# Two bf16 matmul processes (the second starts 3 s after the first) while two recorders of NVML's raw
# per-process samples (listeners.record_proc_samples) run side by side, one asking every 50 ms, one every
# second. The summary says, per read of the slow one, how many entries each process got, and whether an
# entry is the driver's newest tick (as the fast recorder saw it) or something else (an average).
# Reads the GPU only; never changes MIG, clocks or limits. ~40 s. DRY=1: the replay backend, no load.
set -u
. benchmarks/gpu_lib.sh  # REPO, PYTHONPATH; gpu_* and say
gpu_wheels
gpu_dry h200_matmul.json
OUT=${OUT:-/tmp/proc-util-read-rate-out}; mkdir -p "$OUT"
gpu_work "${WORK:-/tmp/proc-util-read-rate}"
gpu_machine "$W/machine.txt" name,driver_version,mig.mode.current,compute_mode

LOAD='
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
torch.cuda.synchronize(); time.sleep(float(sys.argv[1]))
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for _ in range(10): c = a @ b
    torch.cuda.synchronize()
print("load done", sys.argv[1], flush=True)
'
timeout -k 3 25 python3 -m listeners.record_proc_samples --out "$W/fast.jsonl" --interval 0.05 --seconds 18 > "$W/fast.log" 2>&1 &
FAST=$!
timeout -k 3 25 python3 -m listeners.record_proc_samples --out "$W/slow.jsonl" --interval 1.0 --seconds 18 > "$W/slow.log" 2>&1 &
SLOW=$!
if [ "$DRY" != 1 ]; then
  timeout -k 3 25 python3 -c "$LOAD" 2 12 > "$W/load1.log" 2>&1 &
  timeout -k 3 25 python3 -c "$LOAD" 5 8 > "$W/load2.log" 2>&1 &
fi
wait $FAST $SLOW
wait

timeout -k 3 30 python3 - "$W" > "$W/summary.txt" 2>&1 <<'PY'
import collections, json, sys
w = sys.argv[1]
def rows(name):
    with open(f"{w}/{name}.jsonl") as fh:
        return [json.loads(line) for line in fh if line.strip()]
fast = [r for r in rows("fast") if r["kind"] == "util"]
slow = [r for r in rows("slow") if r["kind"] == "util"]
ticks = {(r["pid"], r["ts_us"]): r["sm"] for r in fast}
print(f"fast recorder: {len(fast)} samples; slow recorder: {len(slow)} samples")
calls = collections.defaultdict(list)
for r in slow:
    calls[r["t"]].append(r)
per = collections.Counter()
same = other = unseen = 0
for t, entries in sorted(calls.items()):
    by_pid = collections.Counter(e["pid"] for e in entries)
    per.update(by_pid.values())
    line = []
    for e in entries:
        tick = ticks.get((e["pid"], e["ts_us"]))
        if tick is None:
            unseen += 1
            how = "ts not seen by the fast recorder"
        elif tick == e["sm"]:
            same += 1
            how = "= that tick"
        else:
            other += 1
            how = f"!= that tick ({tick})"
        line.append(f"pid {e['pid']} ts {e['ts_us']} sm {e['sm']} {how}")
    print(f"slow read at {t:.3f}: {len(entries)} entries; " + "; ".join(line))
print("entries per process per slow read:", dict(sorted(per.items())))
print(f"slow entries equal to the fast recorder's tick: {same}, differing: {other}, tick unseen: {unseen}")
PY
cp "$W/summary.txt" "$OUT/" 2>/dev/null
tar -czf "$OUT/proc_util_read_rate.tar.gz" -C "$(dirname "$W")" "$(basename "$W")"
echo "== summary"; tail -4 "$W/summary.txt"; cat "$W/machine.txt" | head -2
