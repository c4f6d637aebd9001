"""The plain pass's processes: one lane per device, each lane taking the queue's next job when its last one
ended, each job its command as given in an environment without radt-ext (no RADT_EXT_*/MLFLOW_* variables,
no progress hook on PYTHONPATH), CUDA_VISIBLE_DEVICES its lane's device. Nothing watches the jobs: their
start, end and exit code are all that is kept, handed to `on_end` as each ends (it must not block).

SIGINT/SIGTERM reach every running job (its whole session) and no lane starts another.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from radt_ext.collocation.modes import CPU
from radt_ext.run.signals import SignalRelay, join, wait_child
from radt_ext.workload_api.autoprogress import SITE_DIR


@dataclass
class PlainJob:
    name: str
    key: str  # sweep.workload_hash: its command, env and device place
    source: str  # sweep.workload: the spec's workload it came from; with the key, the job across passes
    # (its exclusive and packed runs carry both tags too)
    command: list[str]
    params: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the spec's own env for it
    cwd: str | None = None


@dataclass
class Ended:
    job: PlainJob
    device: str
    started: float
    ended: float
    returncode: int
    log: Path
    stopped: bool = False  # it got the sweep's stop signal

    @property
    def wall_s(self) -> float:
        return self.ended - self.started

    @property
    def status(self) -> str:
        if self.returncode == 0:
            return "FINISHED"
        return "KILLED" if self.stopped else "FAILED"


def plain_env(device: str, own: dict[str, str], base: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(("RADT_EXT_", "MLFLOW_"))}
    site = os.path.realpath(SITE_DIR)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) != site]
    if parts:
        env["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        env.pop("PYTHONPATH", None)
    env.update(own)
    env["CUDA_VISIBLE_DEVICES"] = "" if device == CPU else device
    return env


class Lanes:
    def __init__(self, jobs: list[PlainJob], devices: list[str], folder: Path,
                 on_end: Callable[[Ended], None] = lambda e: None):
        self.jobs = list(jobs)
        self.devices = list(devices)
        self.folder = Path(folder)
        self.on_end = on_end
        self._lock = threading.Lock()
        self._next = 0
        self._running: dict[str, subprocess.Popen] = {}
        self.stopping: int | None = None
        self.ended: list[Ended] = []

    def stop(self, signum: int) -> None:
        with self._lock:
            self.stopping = self.stopping or signum
            procs = list(self._running.values())
        for proc in procs:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signum)

    def _take(self) -> PlainJob | None:
        with self._lock:
            if self.stopping or self._next >= len(self.jobs):
                return None
            self._next += 1
            return self.jobs[self._next - 1]

    def run(self) -> list[Ended]:
        """Every job (until a stop), in lanes; what ended, in the order it ended."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with SignalRelay(self.stop):
            threads = [threading.Thread(target=self._lane, args=(d,), name=f"radt-plain-{d}", daemon=True)
                       for d in self.devices]
            for t in threads:
                t.start()
            for t in threads:
                join(t, 0.2)
        return list(self.ended)

    def _lane(self, device: str) -> None:
        while (job := self._take()) is not None:
            ended = self._one(job, device)
            with self._lock:
                self.ended.append(ended)
            self.on_end(ended)

    def _one(self, job: PlainJob, device: str) -> Ended:
        log = self.folder / f"{job.name}.log"
        with open(log, "wb") as out:
            started = time.time()
            try:
                proc = subprocess.Popen(job.command, env=plain_env(device, job.env), cwd=job.cwd, stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError as exc:
                out.write(f"cannot start {job.command[0]!r}: {exc.strerror or exc}\n".encode())
                return Ended(job, device, started, time.time(), 127, log)
            with self._lock:
                self._running[device] = proc
                stopping = self.stopping
            if stopping:  # the stop came while it started: it gets the signal too
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, stopping)
            code = wait_child(proc)
            ended = time.time()
            with self._lock:
                self._running.pop(device, None)
                stopped = self.stopping is not None
        return Ended(job, device, started, ended, code if code >= 0 else 128 - code, log, stopped)


__all__ = ["PlainJob", "Ended", "Lanes", "plain_env"]
