"""What one NVML or /proc read costs a launch-bound job on the same GPU: a loop of small kernels (batch-4
Linear layers, synchronised every step, as a decoder is) runs in a child process and notes its step count every
20 ms, while this process makes one kind of call at `--rate` Hz in windows of `--window` s, off and on in turn.
A call's cost is the loop's rate lost in its on windows against the off windows beside them, and that loss
divided by the calls made: milliseconds of the job's progress lost per call.

    python -m benchmarks.sampling.nvml_contention --out DIR --rate 20 --window 1 --cycles 3
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import table

CALLS = 9  # the kinds of call `calls` makes
LOOP = r"""
import json, sys, time, torch
from torch import nn
end = time.time() + float(sys.argv[1])
layers = [nn.Linear(512, 512).cuda() for _ in range(8)]
x = torch.randn(4, 512, device="cuda")
marks, n = [], 0
with torch.inference_mode():
    while time.time() < end:
        y = x
        for l in layers:
            y = l(y)
        y.sum().item()
        n += 1
        if n % 5 == 0:
            marks.append((time.time(), n))
print(json.dumps(marks))
"""


def calls(pid: int):
    import psutil
    import pynvml as n

    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    last = {"t": 0}
    gpm = {}

    def samples():
        n.nvmlDeviceGetSamples(h, n.NVML_TOTAL_POWER_SAMPLES, last["t"])
        last["t"] = int(time.time() * 1e6) - 100_000

    def gpm_sample():
        if "s" not in gpm:
            gpm["s"] = n.nvmlGpmSampleAlloc()
        n.nvmlGpmSampleGet(h, gpm["s"])

    proc = psutil.Process(pid)

    def top():
        with proc.oneshot():
            proc.cpu_times(), proc.memory_info(), proc.num_threads()
        proc.children(recursive=True)

    return {
        "energy counter (GetTotalEnergyConsumption)": lambda: n.nvmlDeviceGetTotalEnergyConsumption(h),
        "field values (power avg, memory temp)": lambda: n.nvmlDeviceGetFieldValues(
            h, [n.NVML_FI_DEV_POWER_AVERAGE, n.NVML_FI_DEV_MEMORY_TEMP]),
        "power samples drain (GetSamples)": samples,
        "cheap reads (temp, clocks, util, memory, pstate, throttle)": lambda: (
            n.nvmlDeviceGetTemperature(h, 0), n.nvmlDeviceGetClockInfo(h, 1), n.nvmlDeviceGetClockInfo(h, 2),
            n.nvmlDeviceGetUtilizationRates(h), n.nvmlDeviceGetMemoryInfo(h), n.nvmlDeviceGetPerformanceState(h),
            n.nvmlDeviceGetCurrentClocksEventReasons(h)),
        "running processes (GetComputeRunningProcesses)": lambda: n.nvmlDeviceGetComputeRunningProcesses(h),
        "process utilization (GetProcessUtilization)": lambda: n.nvmlDeviceGetProcessUtilization(
            h, int((time.time() - 1) * 1e6)),
        "GPM sample (GpmSampleGet)": gpm_sample,
        "PCIe throughput (GetPcieThroughput)": lambda: n.nvmlDeviceGetPcieThroughput(h, 0),
        "process tree (psutil, as top)": top,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--window", type=float, default=1.0)
    ap.add_argument("--cycles", type=int, default=3)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    total = 4 + CALLS * 2 * args.window * args.cycles + 2  # the loop's seconds: warm-up, every call's windows
    loop = subprocess.Popen([sys.executable, "-c", LOOP, str(total)], stdout=subprocess.PIPE, text=True)
    table_calls = calls(loop.pid)
    assert len(table_calls) == CALLS
    time.sleep(4)  # the loop's CUDA start and warm-up
    windows = []
    for name, call in table_calls.items():
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - a call this GPU lacks: said, skipped
            windows.append({"call": name, "error": str(exc)})
            continue
        for _ in range(args.cycles):
            t0 = time.time()
            time.sleep(args.window)
            windows.append({"call": name, "on": False, "t0": t0, "t1": time.time()})
            t0, made, cpu = time.time(), 0, 0.0
            while time.time() < t0 + args.window:
                c0 = time.thread_time()
                try:
                    call()
                except Exception:  # noqa: BLE001 - e.g. no new process sample yet: the call was made all the same
                    pass
                cpu += time.thread_time() - c0
                made += 1
                time.sleep(max(0.0, t0 + made / args.rate - time.time()))
            windows.append({"call": name, "on": True, "t0": t0, "t1": time.time(), "calls": made, "cpu_s": cpu})
    marks = json.loads(loop.communicate()[0].strip() or "[]")

    def rate(w):
        pts = [(t, n) for t, n in marks if w["t0"] + 0.05 <= t <= w["t1"]]
        return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0]) if len(pts) > 2 else float("nan")

    rows, res = [], []
    for name in table_calls:
        ws = [w for w in windows if w["call"] == name]
        if ws and "error" in ws[0]:
            rows.append([name, "", "", "", ws[0]["error"]])
            continue
        losses, per_call = [], []
        for i in range(1, len(ws), 2):
            off, on = rate(ws[i - 1]), rate(ws[i])
            loss = 1 - on / off
            losses.append(loss)
            per_call.append(loss * (ws[i]["t1"] - ws[i]["t0"]) / ws[i]["calls"] * 1000)
        cpu_ms = 1000 * sum(w["cpu_s"] for w in ws if w.get("on")) / max(1, sum(w["calls"] for w in ws if w.get("on")))
        res.append({"call": name, "losses": losses, "ms_lost_per_call": per_call, "cpu_ms_per_call": cpu_ms})
        rows.append([name, f"{100 * statistics.median(losses):+.2f}", f"{statistics.median(per_call):.3f}",
                     f"{cpu_ms:.3f}", ""])
    md = (f"### One kind of call at {args.rate:g} Hz beside a launch-bound loop on the same GPU\n\n"
          + table(["call", "loop's rate lost % (median)", "ms of progress lost per call", "caller CPU ms per call",
                   "error"], rows) + "\n")
    (out / "nvml_contention.md").write_text(md)
    (out / "nvml_contention.json").write_text(json.dumps({"rate": args.rate, "window": args.window, "calls": res,
                                                          "windows": windows}, indent=1))
    print(md)


if __name__ == "__main__":
    main()
