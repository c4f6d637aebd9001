"""On a loaded machine (two busy processes per core beside it), a real `radt-ext run` into a SQLite store
that does not exist yet starts its workload within a second of radt-ext's first line (Python's own start-up
before it is not radt-ext's to shorten), and SIGTERM or SIGINT at any moment (at once, during start-up,
while MLflow is imported and the store made, once the run exists) ends radt-ext and the workload's whole
process tree within 5 s: the run ends KILLED in the store or, when it was not made in time, in the spool
that `radt-ext sync` replays; a signal before the workload started is one line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil
import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import radt

pytestmark = pytest.mark.alone  # it times a stop after a signal: no other test runs beside it

STOP_S = 5.0  # signal → radt-ext and every process of the workload gone
START_S = 1.0  # radt-ext's first line (Python's own start-up not counted) → the workload's first instruction
MOMENTS = (0.0, 0.3, 1.0, 4.0, "run")  # seconds after the command, or once radt-ext announced its run


@pytest.fixture
def loaded():
    """Two busy loops per core for the test's length (other developers' work comes on top)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 1) * 2)]
    time.sleep(1.0)  # they are running before the first command
    yield
    for proc in procs:
        proc.kill()
        proc.wait()


def _alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _marked(mark: str) -> list[int]:
    out = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("RADT_TEST_MARK") == mark:
                out.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


class Trial:
    """One `radt-ext run --listeners top -- bash -c "sleep 120 & python …; wait"`, signalled once."""

    def __init__(self, tmp_path, sig: int, moment):
        self.dir = tmp_path / f"{signal.Signals(sig).name}-{moment}"
        self.dir.mkdir()
        self.sig, self.moment, self.mark = sig, moment, uuid.uuid4().hex
        self.uri = f"sqlite:///{self.dir / 'mlflow.db'}"
        self.began, self.pids = self.dir / "began", self.dir / "pids"
        script = (f"date +%s.%N > {self.began}; echo $$ >> {self.pids}; sleep 120 & echo $! >> {self.pids}; "
                  f"python -c 'import os, time; open(\"{self.pids}\", \"a\").write(f\"{{os.getpid()}}\\n\"); "
                  f"time.sleep(120)'; wait")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RADT_EXT_"))}
        env.update({"MLFLOW_TRACKING_URI": self.uri, "RADT_EXT_SPOOL_DIR": str(self.dir / "spool"),
                    "HOME": str(self.dir), "RADT_TEST_MARK": self.mark,
                    "RADT_EXT_TIMINGS": str(self.dir / "timings.json")})  # radt-ext's steps, written as it exits
        self.lines: list[str] = []
        self.announced = threading.Event()
        self.started = time.time()
        self.proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "run", "--listeners", "top", "--",
                                      "bash", "-c", script], env=env, cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("radt-ext: run ") and " in experiment " in line:
                self.announced.set()

    def stop(self) -> None:
        if self.moment == "run":
            assert self.announced.wait(300), f"no run announced: {self.lines[-5:]}"
        else:
            time.sleep(max(0.0, self.started + self.moment - time.time()))
        self.signalled = time.time()
        self.proc.send_signal(self.sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # every thread's stack on stderr (faulthandler), then the failure
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(timeout=30)
            self._reader.join(10)
            raise AssertionError(f"{self.where()}\nstill running 60 s after the signal:\n" + "\n".join(self.lines[-80:]))
        finally:
            self.exited = time.time()
            self._reader.join(10)
            # every process of the workload's tree: its pids, and any carrying the test's mark
            self.deadline_left = self.signalled + STOP_S - time.time()
            self.left = self._left_after(max(0.0, self.deadline_left))
            for pid in self.left:
                psutil.Process(pid).kill()

    def _left_after(self, wait: float) -> list[int]:
        pids = [int(x) for x in self.pids.read_text().split()] if self.pids.exists() else []
        end = time.time() + wait
        while True:
            left = sorted(set(_alive(pids)) | set(_marked(self.mark)))
            if not left or time.time() >= end:
                return left
            time.sleep(0.1)

    def start_latency(self) -> float:
        """From radt-ext's first line to the workload's first instruction."""
        return float(self.began.read_text()) - json.loads((self.dir / "timings.json").read_text())["cli_imported"]

    def start_steps(self) -> str:
        t = json.loads((self.dir / "timings.json").read_text())
        first = t["cli_imported"]
        return "; ".join(f"{k} {t[k] - first:+.2f}" for k in ("session_started", "checked", "workload_started")
                         if k in t) + f"; workload began {float(self.began.read_text()) - first:+.2f}"

    def workload_launched(self) -> bool:
        """radt-ext had started the workload's process (its first line may not have run before the signal)."""
        timings = self.dir / "timings.json"
        return timings.exists() and "workload_started" in json.loads(timings.read_text())

    def where(self) -> str:
        steps = ""
        if (self.dir / "timings.json").exists():  # radt-ext's steps after the signal, to see where time went
            t = json.loads((self.dir / "timings.json").read_text())
            steps = "; ".join(f"{k} {v - self.signalled:+.2f}" for k, v in sorted(t.items(), key=lambda kv: kv[1])
                              if v >= self.signalled - 0.5)
        took = getattr(self, "exited", time.time()) - self.signalled
        return (f"{signal.Signals(self.sig).name} at {self.moment}: exit {self.proc.returncode} "
                f"{took:.2f} s after the signal ({steps}); stderr:\n"
                + "\n".join(self.lines[-6:]))


def _runs(uri: str) -> list:
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_stop_at_any_moment_under_load_ends_everything_within_5_s(tmp_path, loaded):
    trials = []
    for moment in MOMENTS:
        for sig in (signal.SIGTERM, signal.SIGINT):
            trial = Trial(tmp_path, sig, moment)
            trial.stop()
            trials.append(trial)
    synced = False
    for t in trials:  # the figures, shown with `pytest -s`
        began = (f"{t.start_latency():.2f} s after radt-ext's first line, "
                 f"{float(t.began.read_text()) - t.started:.2f} s after the command") if t.began.exists() else "never"
        print(f"{signal.Signals(t.sig).name} at {t.moment}: workload began {began}; radt-ext "
              f"exited {t.exited - t.signalled:.2f} s after the signal; {t.lines[-1:] or t.proc.returncode}")
    for t in trials:
        where = t.where()
        assert t.exited - t.signalled <= STOP_S, where
        assert not t.left, f"{where}\nprocesses left {STOP_S:g} s after the signal: {t.left}"
        if not t.began.exists() and not t.workload_launched():  # stopped before the workload started: one line
            if t.proc.returncode == 128 + t.sig:
                assert t.lines[-1].startswith(f"radt-ext: stopped by {signal.Signals(t.sig).name} before the "
                                              "workload started"), where
            else:  # or Python had not yet run radt-ext's first line: its own default action
                assert t.signalled - t.started < START_S, where
                assert (t.proc.returncode == -t.sig and not t.lines) or \
                    (t.sig == signal.SIGINT and t.lines[-1:] == ["KeyboardInterrupt"]), where
            continue
        if t.began.exists():  # else the signal reached the workload before its first line: killed all the same
            assert t.start_latency() <= START_S, f"{where}\nworkload started late: {t.start_steps()}"
        assert t.proc.returncode == 128 + t.sig, where
        if "recorded with its samples in" in t.lines[-1]:  # not made in time: the spool, which sync replays
            assert f"run KILLED (exit code -{t.sig})" in t.lines[-1] or "run KILLED" in t.lines[-1], where
            if not synced:
                done = radt("sync", env={"MLFLOW_TRACKING_URI": t.uri, "RADT_EXT_SPOOL_DIR": str(t.dir / "spool"),
                                         "HOME": str(t.dir)}, cwd=t.dir, timeout=600)
                assert done.returncode == 0, done.stderr[-2000:]
                synced = True
            else:
                continue
        runs = _runs(t.uri)
        assert [r.info.status for r in runs] == ["KILLED"], where
        assert runs[0].data.tags["radt_ext.exit_code"] == str(-t.sig), where
    assert any(t.moment == "run" and t.began.exists() and "recorded with its samples in" not in t.lines[-1]
               for t in trials)  # a run that had begun in the store
