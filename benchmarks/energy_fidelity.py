"""Energy fidelity: the GPU's energy counter vs integrated power, at several sampling intervals.

    python -m benchmarks.energy_fidelity --out docs/benchmarks/gpu

A load runs in a child process (steady: back-to-back bf16 8192² matmuls; bursty: matmul
bursts of 50–400 ms separated by 50–600 ms idle gaps, a fixed pseudo-random pattern) while
this process reads power (instantaneous and NVML's average) and the energy counter every 20 ms
through the `nvml` listener.
For each interval (0.02, 0.1, 0.5, 1 s) the 20 ms series is thinned to that interval at
every possible phase; power is integrated with the trapezoid rule of radt-ext's own
summaries (`radt_ext.summaries.Stat`) and compared with the counter's difference over the
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
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        mm, sync = (lambda: a @ b), torch.cuda.synchronize
    else:  # plumbing check without a GPU
        import numpy as np

        a = np.ones((128, 128), dtype=np.float32)
        mm, sync = (lambda: a @ a), (lambda: None)
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
    """Power and energy of GPU 0 every BASE seconds through the `nvml` listener."""

    def __init__(self):
        super().__init__(daemon=True)
        from benchmarks.sampling import power_energy_listener

        self.listener = power_energy_listener(BASE)
        self.samples: list[tuple[float, float, float, float]] = []  # (time, power W, energy J, avg power W)
        self.stop_event = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        tick = 0
        try:
            while not self.stop_event.is_set():
                for reading in self.listener.sample():
                    v = reading.values
                    if "gpu0_power_w" in v and "gpu0_energy_j" in v:
                        self.samples.append((reading.time, v["gpu0_power_w"], v["gpu0_energy_j"],
                                             v.get("gpu0_power_avg_w", float("nan"))))
                tick = max(tick + 1, int((time.monotonic() - start) / BASE) + 1)
                self.stop_event.wait(max(0.0, start + tick * BASE - time.monotonic()))
        finally:
            self.listener.close()


def compare(samples: list[tuple], t0: float, t1: float, interval: float, column: int = 1) -> dict:
    """Integrated power (samples' `column`: 1 instantaneous, 3 NVML's average) vs the counter."""
    from radt_ext.summaries import Stat

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
    sampler = Sampler()
    sampler.start()
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.energy_fidelity", "--child", kind,
                             "--seconds", str(seconds)], stdout=subprocess.PIPE, text=True)
    marks = {}
    for line in proc.stdout:
        word, _, value = line.strip().partition(" ")
        if word in ("start", "end"):
            marks[word] = float(value)
    proc.wait()
    time.sleep(0.2)
    sampler.stop_event.set()
    sampler.join()
    if proc.returncode != 0 or set(marks) != {"start", "end"}:
        raise RuntimeError(f"{kind} load exited {proc.returncode} with marks {marks}")
    t0, t1 = marks["start"], marks["end"]
    times = [s[0] for s in sampler.samples if t0 <= s[0] <= t1]
    gaps = [b - a for a, b in zip(times, times[1:])]
    power = [s[1] for s in sampler.samples if t0 <= s[0] <= t1]
    return {"load": kind, "window_s": t1 - t0, "base_samples": len(times),
            "base_interval_s_median": spread(gaps)["median"], "base_interval_s_max": max(gaps, default=float("nan")),
            "power_w": spread(power),
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
    md = "\n".join([
        "### Energy fidelity: integrated power vs the NVML energy counter (GPU 0)", "",
        table(["load", "interval s", "phases", "counter J (median)", "error % (median over phases)",
               "worst |error| %", "avg-power error % (median)", "avg-power worst |error| %", "load"], rows), "",
        "Error = (trapezoid integral of sampled power − counter difference) / counter difference, over the "
        "child's load window; one 20 ms series thinned to each interval at every phase. `power_w` is the "
        "instantaneous power field radt-ext logs; the avg-power columns integrate NVML's averaged power "
        "(`power_avg_w`, ~1 s average on Hopper) the same way.", ""])
    write_results(args.out, "energy_fidelity", {"loads": loads}, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
