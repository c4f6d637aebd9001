"""What a 10 Hz NVML sampler costs at the least: one process per variant, CPU over a window.

    python -m benchmarks.sampling.tick_floor --seconds 10 --settle 2 --interval 0.1 --repeats 2 --out results

Each variant runs in a fresh process that opens NVML and the first GPU, settles, then measures
its own CPU (`time.process_time`, every thread, ns resolution) over `--seconds` while one thread
wakes every `--interval` and does the variant's work:
- `idle`: NVML open, no thread (what an open NVML costs by itself);
- `wake`: the thread wakes and does nothing (what waking costs);
- `reads`: the `nvml` listener's per-tick driver calls made straight through pynvml (temperature,
  SM and memory clocks, utilization, memory, performance state, clock-event reasons, one
  field-values call), no listener code;
- `listener`: `NvmlListener.sample()`, as the monitor calls it (power buffer drained once a
  second, the energy counter every `ENERGY_EVERY_S`);
- `monitor`: the real `Monitor` thread with the `nvml` listener, readings through the recorder's
  path (summaries, store filter) into a list: everything of the monitor process but the writer;
- `*_pinned`: the same with the process pinned to one CPU (does a wake-up on the same core cost less?).
The lowest of these that does the listener's reads bounds what `nvml` at that interval can cost.
Also reported: which of the driver's sample buffers the GPU answers (`nvmlDeviceGetSamples`).
Works against the NVML replay backend too (Python only, no driver calls).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

from benchmarks.common import fmt, table, write_results

VARIANTS = ("idle", "wake", "reads", "reads_pinned", "listener", "monitor", "monitor_pinned")


def _open_gpu():
    from listeners.nvml_backend import nvml

    nv = nvml()
    nv.nvmlInit()
    return nv, nv.nvmlDeviceGetHandleByIndex(0)


def _reads(nv, gpu):
    fields = [nv.NVML_FI_DEV_POWER_AVERAGE, nv.NVML_FI_DEV_MEMORY_TEMP]

    def tick():
        nv.nvmlDeviceGetTemperature(gpu, nv.NVML_TEMPERATURE_GPU)
        nv.nvmlDeviceGetClockInfo(gpu, nv.NVML_CLOCK_SM)
        nv.nvmlDeviceGetClockInfo(gpu, nv.NVML_CLOCK_MEM)
        nv.nvmlDeviceGetUtilizationRates(gpu)
        nv.nvmlDeviceGetMemoryInfo(gpu)
        nv.nvmlDeviceGetPerformanceState(gpu)
        nv.nvmlDeviceGetCurrentClocksEventReasons(gpu)
        nv.nvmlDeviceGetFieldValues(gpu, fields)
    return tick


def _recorder_path():
    """`Recorder._sink` itself without a writer: summaries and the store filter, points kept in a list."""
    from types import SimpleNamespace

    from radt_ext.store.point_filter import PointFilter
    from radt_ext.sampling.recorder import Recorder
    from radt_ext.figures.summaries import Summaries

    points: list = []
    state = SimpleNamespace(t0=time.time(), summaries=Summaries(), points=PointFilter(lambda *p: points.append(p)),
                            keep=None, workload_runs=None)
    return (lambda listener, reading: Recorder._sink(state, listener, reading)), points


def _pin() -> int:
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def child(variant: str, seconds: float, settle: float, interval: float) -> dict:
    out: dict = {"variant": variant, "interval_s": interval}
    if variant.endswith("_pinned"):
        out["pinned_cpu"] = _pin()
    base = variant.removesuffix("_pinned")
    nv, gpu = _open_gpu()
    stop, ticks = threading.Event(), [0]
    threads: list[threading.Thread] = []
    monitor = lst = None
    if base in ("wake", "reads", "listener"):
        if base == "wake":
            work = lambda: None  # noqa: E731
        elif base == "reads":
            work = _reads(nv, gpu)
        else:
            from listeners.base import Target
            from listeners.nvml import NvmlListener

            lst = NvmlListener(Target(pid=os.getpid()), interval)
            lst.open()
            work = lst.sample

        def loop():
            start, n = time.monotonic(), 0
            while True:
                n += 1
                if stop.wait(max(0.0, start + n * interval - time.monotonic())):
                    return
                work()
                ticks[0] += 1
        threads.append(threading.Thread(target=loop, daemon=True))
    elif base == "monitor":
        from listeners.base import Target
        from listeners.nvml import NvmlListener
        from radt_ext.sampling.monitor import Monitor

        sink, points = _recorder_path()
        monitor = Monitor([NvmlListener(Target(pid=os.getpid()), interval)], sink)
    for th in threads:
        th.start()
    if monitor is not None:
        monitor.start()
    time.sleep(settle)
    c0, w0, n0 = time.process_time(), time.monotonic(), ticks[0]
    s0 = monitor.states["nvml"].samples if monitor else 0
    time.sleep(seconds)
    c1, w1 = time.process_time(), time.monotonic()
    # readings handed on: one per tick, and the monitor's also one per driver power sample
    out["ticks"] = (ticks[0] - n0) if monitor is None else monitor.states["nvml"].samples - s0
    stop.set()
    for th in threads:
        th.join()
    if monitor is not None:
        monitor.stop()
        out["error"] = monitor.errors.get("nvml")
    if lst is not None:
        lst.close()
    nv.nvmlShutdown()
    out.update(cpu_s=c1 - c0, wall_s=w1 - w0, pct_of_core=100.0 * (c1 - c0) / (w1 - w0))
    return out


def sample_buffers() -> list[dict]:
    """Which driver sample buffers this GPU answers, with how many samples and their spacing."""
    nv, gpu = _open_gpu()
    rows = []
    try:
        for name in ("NVML_TOTAL_POWER_SAMPLES", "NVML_GPU_UTILIZATION_SAMPLES", "NVML_MEMORY_UTILIZATION_SAMPLES",
                     "NVML_PROCESSOR_CLK_SAMPLES", "NVML_MEMORY_CLK_SAMPLES"):
            try:
                _, samples = nv.nvmlDeviceGetSamples(gpu, getattr(nv, name), 0)
                stamps = sorted(int(s.timeStamp) for s in samples)
                gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
                rows.append({"buffer": name, "samples": len(stamps),
                             "span_s": (stamps[-1] - stamps[0]) / 1e6 if stamps else 0.0,
                             "median_spacing_ms": gaps[len(gaps) // 2] / 1e3 if gaps else float("nan")})
            except Exception as exc:
                rows.append({"buffer": name, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
    finally:
        nv.nvmlShutdown()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seconds", type=float, default=10.0, help="measured window per variant")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds after start before measuring")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=2, help="processes per variant, interleaved")
    ap.add_argument("--out", default="benchmark-results")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.seconds, args.settle, args.interval)))
        return 0
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    runs = []
    for r in range(args.repeats):
        for v in variants:
            cmd = [sys.executable, "-m", "benchmarks.sampling.tick_floor", "--child", v, "--seconds", str(args.seconds),
                   "--settle", str(args.settle), "--interval", str(args.interval)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + args.settle + 120)
            lines = p.stdout.strip().splitlines()
            try:
                res = json.loads(lines[-1])
            except (IndexError, json.JSONDecodeError):
                res = {"variant": v, "error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
            res["repeat"] = r
            runs.append(res)
            print(json.dumps(res), flush=True)
    rows = []
    for v in variants:
        mine = [x for x in runs if x["variant"] == v and "pct_of_core" in x]
        pcts = [x["pct_of_core"] for x in mine]
        wall = sum(x["wall_s"] for x in mine)
        rows.append([v, " / ".join(fmt(p, 3) for p in pcts) or "–", fmt(min(pcts), 3) if pcts else "–",
                     fmt(sum(x["ticks"] for x in mine) / wall, 1) if mine else "–",
                     fmt(1e6 * args.interval * sum(x["cpu_s"] for x in mine) / wall, 0) if mine else "–",
                     next((x["error"] for x in runs if x["variant"] == v and x.get("error")), "")])
    buffers = sample_buffers()
    text = (f"### CPU of a process sampling one GPU every {args.interval:g} s ({args.seconds:g} s windows)\n\n"
            + table(["variant", "% of a core, each process", "lowest", "readings/s",
                    f"CPU µs per {args.interval:g} s", "error"], rows)
            + "\n\n### The driver's sample buffers on this GPU\n\n"
            + table(["buffer", "samples at first read", "span s", "median spacing ms", "error"],
                    [[b["buffer"], b.get("samples", "–"), fmt(b.get("span_s")), fmt(b.get("median_spacing_ms")),
                      b.get("error", "")] for b in buffers]))
    write_results(args.out, "tick_floor", {"runs": runs, "buffers": buffers, "args": vars(args)}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
