"""Record NVML's raw per-process utilization samples of one GPU, for offline analysis.

    python -m listeners.record_proc_samples --out samples.jsonl [--gpu 0] [--interval 0.05] [--seconds N]

Runs until --seconds pass or SIGTERM/SIGINT. Writes one JSON object per line:
  {"kind": "util", "t": wall s, "pid", "ts_us" (NVML's sample time), "sm", "mem"}  every new sample
  {"kind": "power", "t", "w"}                                                     each poll
  {"kind": "proc", "t", "pid", "name", "cmdline", "run_id"}                       each pid, once
  {"kind": "error", "t", "call", "error"}                                         each failing call, once
`run_id` is the process's RADT_EXT_ACTIVE (the MLflow run watching it) when it can be read,
so samples can be matched to runs. Unlike the `gpu_procs` listener it keeps every process's
samples (an MPS server's too), not only a workload's newest. Read-only.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time

import psutil

from listeners.nvml_backend import nvml

RUN_ENV = "RADT_EXT_ACTIVE"


def describe(pid: int) -> dict:
    out = {"pid": pid, "name": "", "cmdline": "", "run_id": ""}
    try:
        p = psutil.Process(pid)
        out["name"] = p.name()
        out["cmdline"] = " ".join(p.cmdline())[:500]
        out["run_id"] = p.environ().get(RUN_ENV, "")
    except (psutil.Error, OSError):
        pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", type=int, default=0, help="NVML index")
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--seconds", type=float, default=0.0, help="0: until SIGTERM/SIGINT")
    args = ap.parse_args(argv)
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    nv = nvml()
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(args.gpu)
    seen: set[int] = set()
    failed: set[str] = set()
    last_ts = 0
    end = time.time() + args.seconds if args.seconds > 0 else float("inf")
    n = 0
    with open(args.out, "w", encoding="utf-8") as fh:
        def write(row: dict) -> None:
            fh.write(json.dumps(row) + "\n")

        def failure(call: str, exc: Exception) -> None:
            if call not in failed:
                failed.add(call)
                write({"kind": "error", "t": time.time(), "call": call, "error": f"{type(exc).__name__}: {exc}"})

        while not stop and time.time() < end:
            t = time.time()
            try:
                write({"kind": "power", "t": t, "w": float(nv.nvmlDeviceGetPowerUsage(handle)) / 1000.0})
            except Exception as exc:
                failure("nvmlDeviceGetPowerUsage", exc)
            pids = []
            try:
                pids = [int(p.pid) for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)]
            except Exception as exc:
                failure("nvmlDeviceGetComputeRunningProcesses", exc)
            samples = []
            try:
                samples = nv.nvmlDeviceGetProcessUtilization(handle, last_ts)
            except nv.NVMLError_NotFound:
                pass  # no new sample since last_ts
            except Exception as exc:
                failure("nvmlDeviceGetProcessUtilization", exc)
            for s in samples:
                ts = int(s.timeStamp)
                if ts <= last_ts and last_ts:
                    continue
                pids.append(int(s.pid))
                write({"kind": "util", "t": t, "pid": int(s.pid), "ts_us": ts, "sm": int(s.smUtil),
                       "mem": int(s.memUtil)})
                n += 1
            if samples:
                last_ts = max([last_ts] + [int(s.timeStamp) for s in samples])
            for pid in pids:
                if pid not in seen:
                    seen.add(pid)
                    write({"kind": "proc", "t": t, **describe(pid)})
            fh.flush()
            time.sleep(max(0.0, args.interval - (time.time() - t)))
    try:
        nv.nvmlShutdown()
    except Exception:
        pass
    print(f"record_proc_samples: {n} samples, {len(seen)} processes -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
