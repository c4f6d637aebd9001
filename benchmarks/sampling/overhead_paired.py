"""Monitoring overhead, paired design: one radt-ext monitor, frozen and thawed in short windows.

    python -m benchmarks.sampling.overhead_paired --out docs/benchmarks/gpu --budget-s 480

`benchmarks.sampling.overhead` starts and stops a monitor around 2 s windows; two such windows of the same
loop differ by ±5 % on the GPU VM, too much to resolve 0.5 %. Here ONE real monitor
(`radt_ext.track(interval=0.1)`, every available listener, a separate process) runs for the whole
measurement while the same training loop (overhead.py's ResNet-18) runs continuously in this
process. The monitor's process tree (the monitor and its children, e.g. a streaming nvidia-smi)
is thawed (SIGCONT) or frozen (SIGSTOP) window by window, in cycles of

    off, on, off, null        (and one closing off window)

where `null` keeps the monitor frozen like `off`: its "loss" is the noise floor (A/A). Every
window trains `--settle` s untimed after the switch, then `--window` s timed. The loss of an on or
null window is 1 - its throughput / the mean of the two off windows beside it; the table gives
the median, the mean and a bootstrap 95 % CI of the mean. No start-up or shut-down of a monitor
is inside any window; what is measured is the cost of a monitor that is running.
"""
from __future__ import annotations

import argparse
import random
import signal
import statistics
import sys
import time

import psutil

from benchmarks.common import fmt, spread, table, write_results
from benchmarks.sampling.overhead import Stop, Trainer, _stop, add_trainer_args, bench_store

CYCLE = ("off", "on", "off", "null")


class MonitorTree:
    """The radt-ext monitor process started by `track()` in this process, and its children."""

    def __init__(self):
        found = [p for p in psutil.Process().children()
                 if "radt_ext.run.monitor_process" in " ".join(_cmdline(p))]
        if len(found) != 1:
            raise RuntimeError(f"expected one radt-ext monitor process under this process, found {len(found)} "
                               "(under `radt-ext run` track() starts none: run this script on its own)")
        self.root = found[0]

    def processes(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def signal(self, signum: int) -> None:
        self._send(self.root, signum)  # the root first: a frozen monitor starts no new child
        for proc in self.processes()[1:]:
            self._send(proc, signum)

    @staticmethod
    def _send(proc: psutil.Process, signum: int) -> None:
        try:
            proc.send_signal(signum)
        except psutil.NoSuchProcess:
            pass

    def wait_frozen(self, timeout: float = 2.0) -> bool:
        """True once every live process of the tree is stopped."""
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for proc in self.processes():
                try:
                    states.append(proc.status())
                except psutil.NoSuchProcess:
                    pass
            if all(s in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE) for s in states):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)

    def cpu_s(self) -> float:
        """CPU seconds of the tree so far (children already reaped count through the root)."""
        total = 0.0
        for proc in self.processes():
            try:
                t = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            total += t.user + t.system
            if proc.pid == self.root.pid:
                total += t.children_user + t.children_system
        return total


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def schedule(cycles: int, budget_s: float, started: float, rng=None):
    """(kind, cycle) of every window: whole cycles while cycles and budget last, then one closing off.
    rng: on and null in a random order per cycle (off, X, off, Y)."""
    cycle = 0
    while cycle < cycles and (cycle == 0 or time.monotonic() - started < budget_s):
        cycle += 1
        kinds = list(CYCLE)
        if rng is not None:
            middle = [kinds[1], kinds[3]]
            rng.shuffle(middle)
            kinds[1], kinds[3] = middle
        yield from ((kind, cycle) for kind in kinds)
    yield "off", cycle


def bootstrap_mean_ci(values: list[float], seed: int, resamples: int = 10000) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean."""
    if len(values) < 2:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def losses(windows: list[dict]) -> None:
    """Each on or null window's loss: 1 - its throughput / the mean of the two off windows beside it."""
    for i, w in enumerate(windows):
        if w["kind"] in ("on", "null") and 0 < i < len(windows) - 1:
            base = (windows[i - 1]["throughput"] + windows[i + 1]["throughput"]) / 2.0
            w["loss_pct"] = 100.0 * (1.0 - w["throughput"] / base)


def loss_summary(windows: list[dict], seed: int) -> dict:
    """Per kind (on, null): the windows' median and mean loss and a bootstrap 95 % interval of the mean."""
    summary = {}
    for kind in ("on", "null"):
        found = [w["loss_pct"] for w in windows if w["kind"] == kind and "loss_pct" in w]
        lo, hi = bootstrap_mean_ci(found, seed)
        summary[kind] = {"windows": len(found), "median_pct": statistics.median(found) if found else float("nan"),
                         "mean_pct": statistics.fmean(found) if found else float("nan"),
                         "ci95_mean_pct": [lo, hi], "ci95_half_width_pct": (hi - lo) / 2,
                         "spread_pct": spread(found)}
    return summary


def run_timestamps(client, run_id: str) -> tuple[int, list[int], list[int]]:
    """(metric keys, every point's timestamp in ms, the timestamps stamped by the monitor itself) of a run.

    The power timeline's points carry the driver's own sample times: the driver samples on while
    the monitor is frozen, and the thawed monitor logs those samples at the times they were taken.
    """
    from radt_ext.store import timelines

    keys = list(client.get_run(run_id).data.metrics)
    # at the full rate: the run's timeline artifact (the store holds the timelines' shape)
    stamps = {k: [m.timestamp for m in history] for k, history in timelines.history(client, run_id, keys).items()}
    own = [ts for k, v in stamps.items() if not k.endswith("_power_w") for ts in v]
    return len(keys), [ts for v in stamps.values() for ts in v], own


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=1000, help="at most this many off/on/off/null cycles")
    ap.add_argument("--budget-s", type=float, default=300.0, help="start no new cycle after this many seconds")
    ap.add_argument("--window", type=float, default=1.0, help="timed seconds per window")
    ap.add_argument("--settle", type=float, default=0.1, help="seconds trained untimed after each switch")
    ap.add_argument("--interval", type=float, default=0.1, help="the monitor's sampling interval (0.1 = 10 Hz)")
    add_trainer_args(ap)
    args = ap.parse_args(argv)
    if args.cycles < 1 or args.window <= 0 or args.settle < 0:
        ap.error("--cycles must be >= 1, --window > 0 and --settle >= 0")

    import torch

    from radt_ext import track

    device = "cuda" if torch.cuda.is_available() else "cpu"
    client = bench_store("benchmark-overhead-paired")

    trainer = Trainer(args.batch, args.width, device, args.model, args.image_size)
    print(f"overhead_paired: {device}, batch {args.batch}, width {args.width}, window {args.window:g} s", flush=True)
    windows: list[dict] = []
    started = time.monotonic()
    stopped = False
    with track(interval=args.interval, run_name="paired-10hz") as run:
        tree = MonitorTree()
        try:
            signal.signal(signal.SIGTERM, _stop)  # from here on SIGTERM stops measuring; results are written
            trainer.run_for(args.warmup)  # monitor on: the first steps take seconds (CUDA start, autotuning)
            for kind, cycle in schedule(args.cycles, args.budget_s, started):
                tree.signal(signal.SIGCONT if kind == "on" else signal.SIGSTOP)
                frozen = kind != "on" and tree.wait_frozen()
                trainer.run_for(args.settle)
                cpu0, t0 = tree.cpu_s(), time.time()
                images, seconds = trainer.run_for(args.window)
                windows.append({"kind": kind, "cycle": cycle, "throughput": images / seconds, "seconds": seconds,
                                "start": t0, "end": time.time(), "monitor_cpu_s": tree.cpu_s() - cpu0,
                                "frozen": frozen})
                if kind == "null":
                    print(f"cycle {cycle} ({time.monotonic() - started:.0f} s): on "
                          f"{windows[-3]['throughput']:,.0f}, null {windows[-1]['throughput']:,.0f} img/s", flush=True)
        except Stop:
            print("SIGTERM: writing the windows measured so far", flush=True)
            stopped = True
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the monitor flush and the run end FINISHED
            tree.signal(signal.SIGCONT)  # always: a frozen monitor would never end the run

    losses(windows)

    keys, stamps, own = run_timestamps(client, run.info.run_id)
    for w in windows:
        if w["kind"] != "on":  # a frozen monitor stamps nothing inside the window
            w["points_inside"] = sum(1 for ts in own if w["start"] * 1000 < ts < int(w["end"] * 1000))
    info = client.get_run(run.info.run_id).info
    run_s = ((info.end_time or info.start_time) - info.start_time) / 1000.0
    on = [w for w in windows if w["kind"] == "on"]
    on_s = sum(w["seconds"] for w in on)
    frozen_windows = [w for w in windows if w["kind"] != "on"]
    summary = loss_summary(windows, args.seed)
    result = {
        "device": device, "args": vars(args), "stopped_by_sigterm": stopped, "run_id": run.info.run_id,
        "run_status": info.status, "metric_keys": keys, "metric_points": len(stamps), "run_s": run_s,
        "points_per_run_s": len(stamps) / run_s if run_s > 0 else float("nan"),
        "monitor_cpu_pct_while_on": 100.0 * sum(w["monitor_cpu_s"] for w in on) / on_s if on_s else float("nan"),
        "frozen_windows": len(frozen_windows),
        "frozen_windows_not_stopped": sum(1 for w in frozen_windows if not w["frozen"]),
        "frozen_windows_with_monitor_cpu": sum(1 for w in frozen_windows if w["monitor_cpu_s"] > 0),
        "frozen_windows_with_points": sum(1 for w in frozen_windows if w["points_inside"]),
        "off_throughput_img_s": spread([w["throughput"] for w in windows if w["kind"] == "off"]),
        "loss": summary, "windows": windows,
    }

    rows = [[kind, s["windows"], fmt(s["median_pct"]), fmt(s["mean_pct"]),
             f"{fmt(s['ci95_mean_pct'][0])} .. {fmt(s['ci95_mean_pct'][1])}", fmt(s["ci95_half_width_pct"])]
            for kind, s in summary.items()]
    md = [f"### Overhead, paired: radt-ext at {1 / args.interval:g} Hz (every available listener) thawed/frozen, "
          f"{trainer.description}, batch {args.batch}, {device}), {args.window:g} s windows, "
          f"{sum(1 for w in windows if w['kind'] == 'on')} cycles", "",
          table(["windows", "n", "median loss %", "mean loss %", "95 % CI of the mean (bootstrap) %",
                 "CI half-width %"], rows), "",
          f"- on = monitor running, null = monitor frozen like off (the noise floor); off windows: median "
          f"{fmt(result['off_throughput_img_s']['median'], 0)} img/s over {result['off_throughput_img_s']['n']}",
          f"- the run ({info.status}): {keys} metric keys, {len(stamps)} points, "
          f"{fmt(result['points_per_run_s'], 1)} per run second (the monitor ran in the on windows and the warm-up only)",
          f"- monitor process tree CPU while on: {fmt(result['monitor_cpu_pct_while_on'], 1)} % of one core",
          f"- frozen check over {len(frozen_windows)} off/null windows: not stopped "
          f"{result['frozen_windows_not_stopped']}, with monitor CPU {result['frozen_windows_with_monitor_cpu']}, "
          f"with points stamped inside {result['frozen_windows_with_points']} (power samples, stamped by the driver, "
          "left out)"]
    if stopped:
        md.append("- stopped early by SIGTERM")
    write_results(args.out, "overhead_paired", result, "\n".join(md))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
