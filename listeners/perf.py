"""Hardware counters of the workload's process tree from `perf stat -I <ms> -x , -p <pid>`.

perf writes one CSV line per event per interval (to stderr, which the stream
merges): `<time>,<count>,<unit>,<event>,<run time>,<pct running>,...`. Counting
follows the tree: perf's counters are inherited by children forked after it
attaches. Counts are per interval; IPC is instructions / cycles of the same
interval.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time

from listeners.base import Listener, ListenerError, Reading, Target
from listeners.streaming import DRAIN_EVERY_S, StreamingProcess

TOOL = "perf"
HARDWARE_EVENTS = ("cycles", "instructions", "cache-misses", "branch-misses")
NOT_COUNTED = ("<not supported>", "<not counted>")


def metric_name(event: str, unit: str) -> str:
    base = "perf_" + event.split(":")[0].replace("-", "_").replace(".", "_").lower()
    if unit == "msec":
        return base + "_s"
    return base + "_count"


class IntervalParser:
    """Collects the lines of one interval (same perf time stamp) into one Reading."""

    def __init__(self, started: float):
        self.started = started  # wall clock when perf was started: perf's times are relative to it
        self.pending_time: str | None = None
        self.pending: dict[str, float] = {}

    def __call__(self, line: str, received: float) -> list[Reading] | None:
        parts = line.strip().split(",")
        if len(parts) < 4 or line.lstrip().startswith("#"):
            return None
        stamp, count, unit, event = parts[0].strip(), parts[1].strip(), parts[2].strip(), parts[3].strip()
        try:
            offset = float(stamp)
        except ValueError:
            return None
        if not event or offset != offset or offset < 0:
            return None
        out: list[Reading] = []
        if self.pending_time is not None and stamp != self.pending_time:
            out = self.flush()
        self.pending_time = stamp
        if count in NOT_COUNTED:
            return out
        try:
            value = float(count)
        except ValueError:
            return out if out else None
        if value != value or abs(value) == float("inf"):
            return out if out else None
        if unit == "msec":
            value /= 1000.0
        self.pending[metric_name(event, unit)] = value
        return out

    def flush(self) -> list[Reading]:
        if self.pending_time is None:
            return []
        values = dict(self.pending)
        cycles, instructions = values.get("perf_cycles_count"), values.get("perf_instructions_count")
        if cycles and instructions is not None:
            values["perf_ipc_ratio"] = instructions / cycles
        when = self.started + float(self.pending_time)
        self.pending_time, self.pending = None, {}
        return [Reading(when, values)] if values else []


def _paranoid() -> int | None:
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class PerfListener(Listener):
    name = "perf"
    description = "perf stat counters of the workload's tree: cycles, instructions, IPC, cache and branch misses"
    default_interval = 1.0
    events: tuple[str, ...] = HARDWARE_EVENTS
    tool = TOOL

    @classmethod
    def probe(cls, target: Target) -> str | None:
        path = shutil.which(cls.tool)
        if path is None:
            return "perf not found on PATH (install linux-tools for this kernel)"
        paranoid = _paranoid()
        if paranoid is not None and paranoid > 2 and os.geteuid() != 0:
            return (f"kernel.perf_event_paranoid is {paranoid}; perf cannot count another process "
                    "(set it to 2 or lower: sysctl kernel.perf_event_paranoid=2)")
        event = cls.events[1] if len(cls.events) > 1 else cls.events[0]  # instructions by default
        try:
            run = subprocess.run([path, "stat", "-x", ",", "-e", event, "true"],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"perf stat failed: {exc}"
        text = run.stderr + run.stdout
        line = next((l for l in text.splitlines() if l.strip().endswith(f",{event},") or f",{event}," in l), None)
        if run.returncode != 0 or line is None:
            first = next((l.strip() for l in text.splitlines() if l.strip()), f"exit code {run.returncode}")
            return f"perf stat -e {event} failed: {first}"
        count = line.split(",")[0].strip()
        if count in NOT_COUNTED:
            return (f"perf cannot count {event} here ({count}: no hardware counters, "
                    "e.g. a VM without PMU passthrough)")
        return None

    def open(self) -> None:
        if self.target.pid is None:
            raise ListenerError("perf needs the workload's pid")
        path = shutil.which(self.tool)
        if path is None:
            raise ListenerError("perf not found on PATH")
        ms = max(10, round(self.interval * 1000))  # perf's smallest -I is 10 ms
        argv = [path, "stat", "-I", str(ms), "-x", ",", "-e", ",".join(self.events),
                "-p", str(self.target.pid)]
        self.parser = IntervalParser(time.time())
        self.stream = StreamingProcess(argv, self.parser, env={**os.environ, "LC_ALL": "C"})
        self.stream.start()
        self.parser.started = time.time()  # perf's interval clock starts once it has attached
        self.interval = max(self.interval, DRAIN_EVERY_S)  # the monitor drains; perf keeps its -I

    def sample(self) -> list[Reading]:
        try:
            return self.stream.drain()
        except ListenerError:
            if self.stream.returncode == 0:  # perf stops by itself when the workload has exited
                return self.parser.flush()
            raise

    def close(self) -> None:
        stream = getattr(self, "stream", None)
        if stream is not None:
            stream.stop()
