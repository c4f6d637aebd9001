"""Energy fidelity: the GPU's energy counter vs integrated power, at several sampling intervals.

    python -m benchmarks.energy.energy_fidelity --out docs/benchmarks/gpu

A load runs in a child process (steady: back-to-back bf16 8192² matmuls; bursty: matmul
bursts of 50–400 ms separated by 50–600 ms idle gaps, a fixed pseudo-random pattern) while
this process (1) runs the `nvml` listener at 10 Hz as the monitor does, keeping its power
timeline (the driver's ~50 Hz power samples, each at its own time, where the sample buffer is
supported), and (2) reads power (instantaneous and NVML's average) and the energy counter every
20 ms point by point, in one nvmlDeviceGetFieldValues call.
The timeline is integrated between the first and last counter reads of the load window and
compared with the counter's difference.
For reference, for each interval (0.02, 0.1, 0.5, 1 s) the 20 ms point-read series is thinned to that interval at
every possible phase; power is integrated with the trapezoid rule of radt-ext's own
summaries (`radt_ext.figures.summaries.Stat`) and compared with the counter's difference over the
same span (the load window the child reports). Reported: median and worst error over phases.
"""
from __future__ import annotations

import argparse
import random
import subprocess
import sys
import threading
import time

from benchmarks.common import fmt, spread, table, write_results
from benchmarks.load import matmul

INTERVALS = (0.02, 0.1, 0.5, 1.0)
BASE = 0.02


# --------------------------------------------------------------------------- the load (child process)

def burst_pattern(seconds: float, seed: int = 6) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    out, total = [], 0.0
    while total < seconds:
        on, off = rng.choice((0.05, 0.1, 0.2, 0.4)), rng.choice((0.05, 0.1, 0.3, 0.6))
        out.append((on, off))
        total += on + off
    return out


def child(kind: str, seconds: float) -> None:
    mm, sync, _ = matmul(cpu_size=128)
    for _ in range(5):
        mm()
    sync()
    time.sleep(1.0)  # back to idle power before the window opens
    print(f"start {time.time():.6f}", flush=True)
    end = time.time() + seconds
    if kind == "steady":
        while time.time() < end:
            for _ in range(4):
                mm()
            sync()
    else:
        for on, off in burst_pattern(seconds):
            stop = time.time() + on
            while time.time() < stop:
                mm()
                sync()
            time.sleep(off)
            if time.time() >= end:
                break
    sync()
    print(f"end {time.time():.6f}", flush=True)


# --------------------------------------------------------------------------- sampling and analysis

class Sampler(threading.Thread):
    """GPU 0's instantaneous power, NVML's average power and the energy counter, read point by point
    every BASE seconds in one nvmlDeviceGetFieldValues call (the reference series)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float, float, float]] = []  # (time, power W, energy J, avg power W)
        self.stop_event = threading.Event()

    def run(self) -> None:
        from listeners.devices import resolve
        from listeners.nvml import field_value
        from listeners.nvml_backend import nvml

        nv = nvml()
        nv.nvmlInit()
        try:
            d = resolve("0")[0]
            gpu = d.parent_handle if d.parent_handle is not None else d.handle
            ids = [nv.NVML_FI_DEV_POWER_INSTANT, nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, nv.NVML_FI_DEV_POWER_AVERAGE]
            start = time.monotonic()
            tick = 0
            while not self.stop_event.is_set():
                now = time.time()
                try:
                    values = []
                    for f in nv.nvmlDeviceGetFieldValues(gpu, ids):
                        try:
                            values.append(field_value(nv, f))
                        except nv.NVMLError:
                            values.append(float("nan"))
                    self.samples.append((now, values[0] / 1000.0, values[1] / 1000.0, values[2] / 1000.0))
                except nv.NVMLError:
                    pass
                tick = max(tick + 1, int((time.monotonic() - start) / BASE) + 1)
                self.stop_event.wait(max(0.0, start + tick * BASE - time.monotonic()))
        finally:
            nv.nvmlShutdown()


class ListenerTimeline(threading.Thread):
    """The `nvml` listener itself at 10 Hz, sampled as the monitor does: its power timeline (the
    driver's ~50 Hz power samples where the buffer is supported) and its energy readings."""

    def __init__(self, interval: float = 0.1):
        super().__init__(daemon=True)
        from listeners.base import Target
        from listeners.nvml import NvmlListener

        self.listener = NvmlListener(Target(cuda_visible_devices="0"), interval)
        self.power: list[tuple[float, float]] = []
        self.energy: list[tuple[float, float]] = []
        self.stop_event = threading.Event()
        self.listener.open()
        self.source = self.listener.tags().get("gpu.0.power_source", "?")

    def _take(self, readings) -> None:
        for r in readings:
            if "gpu0_power_w" in r.values:
                self.power.append((r.time, r.values["gpu0_power_w"]))
            if "gpu0_energy_j" in r.values:
                self.energy.append((r.time, r.values["gpu0_energy_j"]))

    def run(self) -> None:
        interval = self.listener.interval
        start = time.monotonic()
        tick = 0
        try:
            while not self.stop_event.is_set():
                self._take(self.listener.sample())
                tick = max(tick + 1, int((time.monotonic() - start) / interval) + 1)
                self.stop_event.wait(max(0.0, start + tick * interval - time.monotonic()))
            self._take(self.listener.closing_sample())
        finally:
            self.listener.close()


def integrate(points: list[tuple[float, float]], a: float, b: float) -> float:
    """Trapezoid integral of (time, value) points over [a, b], linearly interpolated at both ends,
    with radt-ext's own summaries (`radt_ext.figures.summaries.Stat`)."""
    from radt_ext.figures.summaries import Stat

    def at(t: float) -> float:
        for (t0, v0), (t1, v1) in zip(points, points[1:]):
            if t0 <= t <= t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
        return float("nan")

    stat = Stat()
    stat.add(a, at(a))
    for t, v in points:
        if a < t < b:
            stat.add(t, v)
    stat.add(b, at(b))
    return stat.integral


def compare_timeline(timeline: list[tuple[float, float]], samples: list[tuple], t0: float, t1: float) -> dict:
    """The listener's power timeline integrated between the first and last counter reads in the window."""
    counter = [s for s in samples if t0 <= s[0] <= t1 and s[2] == s[2]]
    inside = [p for p in timeline if t0 <= p[0] <= t1]
    if len(counter) < 2 or len(inside) < 2:
        return {"error": f"{len(counter)} counter reads and {len(inside)} power points in the window"}
    a, b = counter[0], counter[-1]
    joules = integrate(timeline, a[0], b[0])
    delta = b[2] - a[2]
    gaps = sorted(y[0] - x[0] for x, y in zip(inside, inside[1:]))
    return {"points": len(inside), "spacing_s_median": gaps[len(gaps) // 2], "spacing_s_max": gaps[-1],
            "integrated_j": joules, "counter_j": delta,
            "error_pct": 100.0 * (joules - delta) / delta if delta > 0 else float("nan")}


def compare(samples: list[tuple], t0: float, t1: float, interval: float, column: int = 1) -> dict:
    """Integrated power (samples' `column`: 1 instantaneous, 3 NVML's average) vs the counter."""
    from radt_ext.figures.summaries import Stat

    window = [s for s in samples if t0 <= s[0] <= t1 and s[column] == s[column]]
    stride = max(1, round(interval / BASE))
    errors, counter_j = [], []
    for phase in range(stride):
        picked = window[phase::stride]
        if len(picked) < 2:
            continue
        stat = Stat()
        for s in picked:
            stat.add(s[0], s[column])
        counter = picked[-1][2] - picked[0][2]
        if counter > 0:
            errors.append(100.0 * (stat.integral - counter) / counter)
            counter_j.append(counter)
    abs_err = [abs(e) for e in errors]
    return {"interval_s": interval, "phases": len(errors), "error_pct": spread(errors),
            "abs_error_pct_median": spread(abs_err)["median"], "abs_error_pct_max": max(abs_err, default=float("nan")),
            "counter_j_median": spread(counter_j)["median"]}


def measure(kind: str, seconds: float) -> dict:
    timeline = ListenerTimeline()
    sampler = Sampler()
    sampler.start()
    timeline.start()
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.energy.energy_fidelity", "--child", kind,
                             "--seconds", str(seconds)], stdout=subprocess.PIPE, text=True)
    marks = {}
    for line in proc.stdout:
        word, _, value = line.strip().partition(" ")
        if word in ("start", "end"):
            marks[word] = float(value)
    proc.wait()
    time.sleep(0.2)
    sampler.stop_event.set()
    timeline.stop_event.set()
    sampler.join()
    timeline.join()
    if proc.returncode != 0 or set(marks) != {"start", "end"}:
        raise RuntimeError(f"{kind} load exited {proc.returncode} with marks {marks}")
    t0, t1 = marks["start"], marks["end"]
    times = [s[0] for s in sampler.samples if t0 <= s[0] <= t1]
    gaps = [b - a for a, b in zip(times, times[1:])]
    power = [s[1] for s in sampler.samples if t0 <= s[0] <= t1]
    return {"load": kind, "window_s": t1 - t0, "base_samples": len(times),
            "base_interval_s_median": spread(gaps)["median"], "base_interval_s_max": max(gaps, default=float("nan")),
            "power_w": spread(power),
            "timeline_source": timeline.source,
            "timeline": compare_timeline(timeline.power, sampler.samples, t0, t1),
            "timeline_energy_reads": len(timeline.energy),
            "by_interval": [compare(sampler.samples, t0, t1, i) for i in INTERVALS],
            "by_interval_avg_power": [compare(sampler.samples, t0, t1, i, column=3) for i in INTERVALS]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=12.0, help="seconds of each load")
    ap.add_argument("--loads", default="steady,bursty")
    ap.add_argument("--child", choices=("steady", "bursty"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.seconds)
        return 0

    loads = []
    for kind in args.loads.split(","):
        try:
            loads.append(measure(kind, args.seconds))
        except Exception as exc:
            loads.append({"load": kind, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        print({k: v for k, v in loads[-1].items() if k != "by_interval"}, flush=True)

    rows = []
    for load in loads:
        if "error" in load:
            rows.append([load["load"], "–", "–", "–", "–", "–", "–", "–", load["error"]])
            continue
        for c, a in zip(load["by_interval"], load["by_interval_avg_power"]):
            rows.append([load["load"], fmt(c["interval_s"]), c["phases"], fmt(c["counter_j_median"], 1),
                         fmt(c["error_pct"]["median"]), fmt(c["abs_error_pct_max"]),
                         fmt(a["error_pct"]["median"]), fmt(a["abs_error_pct_max"]),
                         f"{fmt(load['power_w']['median'], 0)} W median, {fmt(load['window_s'], 1)} s"])
    timeline_rows = []
    for load in loads:
        t = load.get("timeline", {})
        timeline_rows.append([load["load"], load.get("timeline_source", "–"), t.get("points", "–"),
                              fmt(t.get("spacing_s_median"), 3), fmt(t.get("spacing_s_max"), 3),
                              fmt(t.get("counter_j"), 1), fmt(t.get("integrated_j"), 1), fmt(t.get("error_pct")),
                              load.get("error") or t.get("error", "")])
    md = "\n".join([
        "### Energy fidelity: the `nvml` listener's power timeline (10 Hz listener) vs the energy counter (GPU 0)", "",
        table(["load", "power source", "points", "spacing s (median)", "spacing s (max)", "counter J",
               "integrated J", "error %", "error"], timeline_rows), "",
        "Integrated between the first and last counter reads inside the load window (trapezoid, "
        "`radt_ext.figures.summaries.Stat`, interpolated at both ends): what `summary/e2e_gpu_total_energy_integrated_j` "
        "computes from the logged `gpu0_power_w` points.", "",
        "### Energy fidelity: point reads of power, thinned to each interval, vs the energy counter (GPU 0)", "",
        table(["load", "interval s", "phases", "counter J (median)", "error % (median over phases)",
               "worst |error| %", "avg-power error % (median)", "avg-power worst |error| %", "load"], rows), "",
        "Error = (trapezoid integral of sampled power − counter difference) / counter difference, over the "
        "child's load window; one 20 ms series thinned to each interval at every phase. `power_w` here is the "
        "instantaneous power field read point by point (what the `nvml` listener logs where the driver's sample "
        "buffer is not supported); the avg-power columns integrate NVML's averaged power "
        "(`power_avg_w`, ~1 s average on Hopper) the same way.", ""])
    write_results(args.out, "energy_fidelity", {"loads": loads}, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
