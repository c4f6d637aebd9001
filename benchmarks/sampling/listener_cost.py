"""CPU per sample of each listener as the monitor calls it, part by part, spaced and back to back.

    python -m benchmarks.sampling.listener_cost --samples 100 --out docs/benchmarks/gpu/power_sampling

A thread that sleeps between calls pays more per call than one that calls back to back (its caches
are cold after each sleep), so every figure is taken both ways: `spaced`, one call per `--spacing`
seconds as the monitor makes it at 10 Hz, and `warm`, back to back. Parts:
- each listener's whole `sample()` (`--listeners`, watching this process);
- each reading of the `nvml` listener (its `_readers`, and the power buffer's drain once a second);
- GPM's metrics call with 1, 4 and all 9 metrics (does its cost follow the metrics asked for?);
- a thread that only wakes every `--spacing` seconds (what waking alone costs);
- the recorder's path for one reading (summaries, store filter, writer queue).
CPU is the calling thread's (`time.thread_time_ns`). Works against the NVML replay backend too,
where the NVML parts are the replay's Python, not the driver's.
"""
from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any, Callable

from benchmarks.common import fmt, table, write_results


def per_call_us(fn: Callable[[], Any], n: int, spacing: float) -> float:
    """Mean CPU µs of the calling thread per call, `spacing` seconds of sleep between calls."""
    fn()
    total = 0
    for _ in range(n):
        t = time.thread_time_ns()
        fn()
        total += time.thread_time_ns() - t
        if spacing:
            time.sleep(spacing)
    return total / n / 1000.0


def both(what: str, fn: Callable[[], Any], n: int, spacing: float, every_s: float | None = None,
         sleep_s: float | None = None) -> dict:
    """`every_s`: how often the monitor makes the call (for the share of a core); `sleep_s`: the sleep before
    each spaced call (default `spacing`; the power drain sleeps its period, as what it returns grows with it)."""
    every = spacing if every_s is None else every_s
    spaced = per_call_us(fn, n, spacing if sleep_s is None else sleep_s)
    warm = per_call_us(fn, n, 0.0)
    return {"what": what, "spaced_us": spaced, "warm_us": warm, "every_s": every,
            "pct_of_core": 100.0 * spaced / 1e6 / every}


def wake_cost(n: int, spacing: float) -> dict:
    """CPU of a thread that waits on an Event with a timeout and does nothing else."""
    stop, out = threading.Event(), {}

    def loop():
        t = time.thread_time_ns()
        for _ in range(n):
            stop.wait(spacing)
        out["us"] = (time.thread_time_ns() - t) / n / 1000.0

    th = threading.Thread(target=loop)
    th.start()
    th.join()
    return {"what": "a thread waking only (Event.wait)", "spaced_us": out["us"], "warm_us": float("nan"),
            "every_s": spacing, "pct_of_core": 100.0 * out["us"] / 1e6 / spacing}


def nvml_parts(n: int, spacing: float) -> list[dict]:
    from listeners.base import Target
    from listeners.nvml import NvmlListener
    from listeners.nvml_backend import nvml

    lst = NvmlListener(Target(pid=os.getpid()), spacing)
    lst.open()
    rows = []
    try:
        for reader in lst._readers:
            rows.append(both(f"nvml: {reader.name}", lambda reader=reader: reader.read({}), n, spacing,
                             max(reader.every_s, spacing)))
        for _, buffer, _ in lst._power.values():
            nv = nvml()
            rows.append(both("nvml: power buffer drain", lambda: buffer.drain(nv), max(3, min(n, 20)), spacing,
                             buffer.drain_every_s, buffer.drain_every_s))
        rows.append(both("nvml: whole sample()", lst.sample, n, spacing))
    finally:
        lst.close()
    return rows


def gpm_parts(n: int, spacing: float) -> list[dict]:
    from listeners.gpm import METRICS
    from listeners.nvml_backend import nvml

    nv = nvml()
    nv.nvmlInit()
    rows = []
    try:
        gpu = nv.nvmlDeviceGetHandleByIndex(0)
        a, b = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
        nv.nvmlGpmSampleGet(gpu, a)
        time.sleep(spacing)
        nv.nvmlGpmSampleGet(gpu, b)
        ids = [int(getattr(nv, name)) for name in METRICS]
        for k in (1, 4, len(ids)):
            request = nv.c_nvmlGpmMetricsGet_t()
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = k
            request.sample1, request.sample2 = a, b

            def call(request=request, k=k):
                for j in range(k):
                    request.metrics[j].metricId = ids[j]
                nv.nvmlGpmMetricsGet(request)

            rows.append(both(f"gpm: nvmlGpmMetricsGet, {k} metric(s)", call, n, spacing))
        rows.append(both("gpm: nvmlGpmSampleGet", lambda: nv.nvmlGpmSampleGet(gpu, b), n, spacing))
        nv.nvmlGpmSampleFree(a)
        nv.nvmlGpmSampleFree(b)
    except Exception as exc:
        rows.append({"what": "gpm", "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
    finally:
        nv.nvmlShutdown()
    return rows


def listener_rows(names: list[str], n: int, spacing: float) -> list[dict]:
    from listeners import registry
    from listeners.base import Target

    rows = []
    for name in names:
        target = Target(pid=os.getpid())
        reason = registry.availability(name, target)
        if reason:
            rows.append({"what": f"{name}: sample()", "error": reason})
            continue
        lst = registry.load(name)(target, spacing)
        try:
            lst.open()
            time.sleep(spacing)
            rows.append(both(f"{name}: whole sample()", lst.sample, n, spacing))
        except Exception as exc:
            rows.append({"what": f"{name}: sample()", "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        finally:
            lst.close()
    return rows


def sink_row(n: int, spacing: float) -> dict:
    """One tick of the nvml listener's cheap readings (20 values) through the recorder's path to the queue."""
    from listeners.base import Reading
    from radt_ext.store.point_filter import PointFilter
    from radt_ext.figures.summaries import Summaries

    summaries, sent = Summaries(), []
    points = PointFilter(lambda *p: sent.append(p))
    names = [f"gpu0_v{i}" for i in range(20)]
    state = {"i": 0}

    def tick():
        state["i"] += 1
        t = time.time()
        reading = Reading(t, {k: float(state["i"] % 3) for k in names})
        values = [(k, float(v)) for k, v in reading.values.items()]
        summaries.add_all(t, values)
        for k, v in values:
            points.add("system/" + k, v, int(t * 1000), state["i"])

    return both("recorder path, one reading of 20 values", tick, n, spacing)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100, help="calls per part (slow parts: fewer)")
    ap.add_argument("--spacing", type=float, default=0.1, help="seconds between spaced calls (the monitor's interval)")
    ap.add_argument("--listeners", default="nvml,gpm,smi,top,gpu_procs")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)
    n, s = args.samples, args.spacing
    rows = [wake_cost(n, s), sink_row(n, s)]
    for part in (lambda: nvml_parts(n, s), lambda: gpm_parts(n, s),
                 lambda: listener_rows(args.listeners.split(","), n, s)):
        try:
            rows += part()
        except Exception as exc:
            rows.append({"what": "part", "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        for r in rows:
            print(r, flush=True)
    text = (f"### CPU per call after {s:g} s asleep and back to back ({n} calls each)\n\n"
            + table(["part", "spaced µs", "warm µs", "every s", "% of a core"],
                 [[r["what"], fmt(r.get("spaced_us")), fmt(r.get("warm_us")), fmt(r.get("every_s")),
                   fmt(r.get("pct_of_core")) if "error" not in r else r["error"]] for r in rows]))
    print(text)
    write_results(args.out, "listener_cost", {"rows": rows, "args": vars(args)}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
