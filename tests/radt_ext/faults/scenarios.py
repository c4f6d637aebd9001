"""Fault scenarios, each counting metric points sent against points stored.

Shared by the tests in this folder (which assert on the outcome) and by
benchmarks/store/faults_table.py (which runs them all and writes docs/faults.md).
Everything is real: `radt-ext run` child processes, SQLite stores, `mlflow server`
processes, signals, a full tmpfs. Each scenario takes a fresh directory.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[3]
STANDIN_BIN = REPO / "tests" / "listeners" / "bin"


@dataclass
class Outcome:
    scenario: str
    sent: int
    stored: int
    spooled: int = 0
    lost: int = 0
    duplicates: int = 0
    status: str = ""
    exit_code: int | None = None
    notes: str = ""
    details: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- helpers


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "radt_ext.cli", *args]


def base_env(workdir: Path, uri: str | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "RADT_EXT_")) and k != "PYTEST_CURRENT_TEST"}
    env["MLFLOW_TRACKING_URI"] = uri or f"sqlite:///{workdir / 'mlflow.db'}"
    env["RADT_EXT_SPOOL_DIR"] = str(workdir / "spool")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def runs_in(uri: str) -> list:
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def point_counts(uri: str, run_id: str, prefix: str = "system/") -> tuple[Counter, int]:
    """Points stored per key, and how many of them repeat an identical point (key, time, step, value)."""
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    counts: Counter = Counter()
    dups = 0
    for key in run.data.metrics:
        if key.startswith(prefix):
            history = client.get_metric_history(run_id, key)
            counts[key] = len(history)
            dups += len(history) - len({(m.timestamp, m.step, m.value) for m in history})
    return counts, dups


def outcome_of(name: str, uri: str, run, exit_code: int | None, notes: str = "") -> Outcome:
    counts, dups = point_counts(uri, run.info.run_id)
    tags = run.data.tags
    return Outcome(name, sent=int(tags.get("radt_ext.metrics_sent", -1)), stored=sum(counts.values()),
                   spooled=int(tags.get("radt_ext.metrics_spooled", 0)), duplicates=dups,
                   status=run.info.status, exit_code=exit_code, notes=notes,
                   details={"tags": dict(tags), "counts": dict(counts), "run_id": run.info.run_id})


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"{what}: radt-ext exited early with {proc.returncode}: {err[-2000:]}")
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
    return out


def kill_all(pids: list[int]) -> None:
    for pid in alive(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# ----------------------------------------------------------------------------- workloads

RAISES = textwrap.dedent("""
    import subprocess, sys, time, radt_ext
    # a helper that leaves the process group and would outlive the failed workload
    helper = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
    open("helper.pid", "w").write(str(helper.pid))
    t = time.time()
    while time.time() - t < 1.0:
        radt_ext.log_progress(samples=8)
        time.sleep(0.01)
    raise RuntimeError("the model diverged")
""")

# a workload whose tree tries every way out: a grandchild that ignores SIGTERM, one that calls
# setsid(), and a double-forked daemon whose middle process exits at once (it is never a
# descendant long enough for a poll to see it)
TREE = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    pidfile = sys.argv[1]
    stubborn = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
    escaped = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        pid = os.fork()
        if pid:
            os.write(w, str(pid).encode()); os._exit(0)
        os.close(w); os.close(r)
        time.sleep(300); os._exit(0)
    os.close(w)
    daemon = int(os.read(r, 32))
    os.wait()
    with open(pidfile + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {stubborn.pid} {escaped.pid} {daemon}")
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(300)
""")

SLEEP_AND_MARK = textwrap.dedent("""
    import sys, time, radt_ext
    t = time.time()
    while time.time() - t < float(sys.argv[1]):
        radt_ext.log_progress(samples=1)
        time.sleep(0.05)
    open(sys.argv[2], "w").write("done")
""")

# reports progress until the file argv[1] appears (at most 300 s), then for argv[2] s more, then marks argv[3]
RUN_UNTIL_FILE = textwrap.dedent("""
    import os, sys, time, radt_ext
    def tick():
        radt_ext.log_progress(samples=1)
        time.sleep(0.05)
    t = time.time()
    while not os.path.exists(sys.argv[1]) and time.time() - t < 300:
        tick()
    t = time.time()
    while time.time() - t < float(sys.argv[2]):
        tick()
    open(sys.argv[3], "w").write("done")
""")


# ----------------------------------------------------------------------------- scenarios


def workload_raises(workdir: Path) -> Outcome:
    env = base_env(workdir)
    res = subprocess.run(cli("run", "--listeners", "top", "--interval", "0.05", "--", sys.executable, "-c", RAISES),
                         capture_output=True, text=True, timeout=120, env=env, cwd=workdir)
    helper = [int((workdir / "helper.pid").read_text())]
    left = alive(helper)
    kill_all(helper)
    [run] = runs_in(env["MLFLOW_TRACKING_URI"])
    out = outcome_of("workload raises (leaving a setsid() helper behind)", env["MLFLOW_TRACKING_URI"], run,
                     res.returncode, f"exit code 1 propagated; helper {'LEFT' if left else 'reaped'}")
    out.details.update(stderr=res.stderr, helper_left=left)
    return out


def signal_run(workdir: Path, sig: int) -> Outcome:
    """`radt-ext run` gets SIGINT/SIGTERM while its workload's tree tries to escape."""
    env = base_env(workdir)
    pidfile = workdir / "pids"
    proc = subprocess.Popen(cli("run", "--listeners", "top", "--interval", "0.05", "--",
                                sys.executable, "-c", TREE, str(pidfile)),
                            stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
    pids: list[int] = []
    try:
        for line in proc.stderr:  # the run exists (made while the workload starts; a stop before is spooled)
            if line.startswith("radt-ext: run ") and " in experiment " in line:
                break
        wait_for(pidfile.exists, 60, "the workload tree", proc)
        pids = [int(p) for p in pidfile.read_text().split()]
        time.sleep(0.5)
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        survivors = alive(pids)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(pids)
    [run] = runs_in(env["MLFLOW_TRACKING_URI"])
    out = outcome_of(f"{signal.Signals(sig).name} to `radt-ext run` (tree with SIGTERM-ignoring, setsid and "
                     "double-forked grandchildren)", env["MLFLOW_TRACKING_URI"], run, code,
                     f"{len(pids)} workload processes, {len(survivors)} left")
    out.details.update(pids=pids, survivors=survivors)
    return out


def listener_raises(workdir: Path) -> Outcome:
    """A test-only listener registered in the registry starts raising mid-run."""
    from listeners import registry
    from radt_ext.run.session import WorkloadSession, WorkloadSpec

    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    marker = workdir / "done"
    registry.LISTENERS["flaky"] = "tests.radt_ext.faults.flaky_listener:FlakyListener"
    try:
        s = WorkloadSession(WorkloadSpec(command=[sys.executable, "-c", SLEEP_AND_MARK, "1.5", str(marker)],
                                         listeners="top:0.05,flaky:0.05", tracking_uri=uri,
                                         env={"RADT_EXT_SPOOL_DIR": str(workdir / "spool")}))
        code = s.run()
    finally:
        registry.LISTENERS.pop("flaky", None)
    run = MlflowClient(uri).get_run(s.run_id)
    out = outcome_of("a listener raises mid-run", uri, run, code, "workload finished; the other listener carried on")
    out.details["marker"] = marker.exists()
    from tests.radt_ext.helpers import full_rate

    out.details["full_rate_flaky"] = len(full_rate(uri, s.run_id, "system/flaky_value_count"))
    return out


def tool_disappears(workdir: Path) -> Outcome:
    """The smi listener's nvidia-smi (the stand-in) is killed and removed from PATH mid-run."""
    env = base_env(workdir)
    bindir = workdir / "bin"
    bindir.mkdir()
    for tool in ("nvidia-smi",):
        shutil.copy2(STANDIN_BIN / tool, bindir / tool)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    env["STANDIN_SMI_DIR"] = str(REPO / "tests" / "listeners" / "fixtures" / "smi")
    marker = workdir / "done"
    proc = subprocess.Popen(cli("run", "--listeners", "smi:0.1,top:0.1", "--",
                                sys.executable, "-c", SLEEP_AND_MARK, "4", str(marker)),
                            stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)

    def smi_child():
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    if any("--query-gpu" in a for a in child.cmdline()):
                        return child
        return None

    try:
        tool = wait_for(smi_child, 60, "the nvidia-smi stream", proc)
        time.sleep(1.0)
        (bindir / "nvidia-smi").unlink()  # gone from PATH
        tool.kill()
        code = proc.wait(timeout=60)
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    [run] = runs_in(env["MLFLOW_TRACKING_URI"])
    out = outcome_of("`nvidia-smi` killed and removed from PATH mid-run (smi listener)", env["MLFLOW_TRACKING_URI"],
                     run, code, "workload finished; top carried on")
    out.details.update(marker=marker.exists(), stderr=stderr)
    return out


def sqlite_contention(workdir: Path, n: int = 4, seconds: float = 3.0, interval: float = 0.01) -> Outcome:
    """n concurrent `radt-ext run` writing one SQLite file at `interval` s."""
    env = base_env(workdir)
    uri = env["MLFLOW_TRACKING_URI"]
    # create the schema once, so the n runs do not race on MLflow's migrations
    MlflowClient(uri).search_experiments()
    procs = [subprocess.Popen(cli("run", "--listeners", "top", "--interval", str(interval), "--run-name", f"w{i}",
                                  "--", sys.executable, "-c", SLEEP_AND_MARK, str(seconds), str(workdir / f"d{i}")),
                              stderr=subprocess.PIPE, text=True, env=env, cwd=workdir) for i in range(n)]
    codes, errs = [], []
    for p in procs:
        codes.append(p.wait(timeout=300))
        errs.append(p.stderr.read())
    runs = runs_in(uri)
    per_run = [outcome_of("", uri, r, None) for r in runs]
    sent = sum(o.sent for o in per_run)
    out = Outcome(f"{n} concurrent `radt-ext run` into one SQLite file, top every {interval} s",
                  sent=sent, stored=sum(o.stored for o in per_run), spooled=sum(o.spooled for o in per_run),
                  duplicates=sum(o.duplicates for o in per_run),
                  status=",".join(sorted({r.info.status for r in runs})), exit_code=max(codes) if codes else None,
                  notes=f"{len(runs)} runs, {sent / seconds:.0f} points/s offered; "
                        f"{sum('locked' in e for e in errs)} of {n} stderr mention a lock")
    out.details.update(per_run=[(o.sent, o.stored, o.spooled) for o in per_run], stderr=errs, codes=codes)
    return out


# ----------------------------------------------------------------------------- server outage


def server_outage(workdir: Path) -> Outcome:
    """A real `mlflow server` is killed mid-run, comes back, and `radt-ext sync` replays the spool."""
    from tests.servers import start_mlflow_server

    backend = f"sqlite:///{workdir / 'server.db'}"
    server = start_mlflow_server(backend, workdir / "server")
    port = int(server.url.rsplit(":", 1)[1])
    env = base_env(workdir, uri=server.url)
    marker, outage = workdir / "done", workdir / "server_stopped"
    # the workload runs on until the server is down, however long radt-ext took to reach it
    proc = subprocess.Popen(cli("run", "--listeners", "top", "--interval", "0.05", "--",
                                sys.executable, "-c", RUN_UNTIL_FILE, str(outage), "3", str(marker)),
                            stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
    try:
        def stored_some():
            runs = runs_in(backend)
            return runs and point_counts(backend, runs[0].info.run_id)[0].total() > 20
        wait_for(stored_some, 90, "points stored before the outage", proc)
        server.stop()
        outage.write_text("")
        _, stderr = proc.communicate(timeout=180)  # read as it comes: a full pipe would block radt-ext
        code = proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    [run] = runs_in(backend)
    before = point_counts(backend, run.info.run_id)[0].total()
    status_before = run.info.status
    spool = workdir / "spool"
    spooled_lines = sum(len(p.read_text().splitlines()) for p in spool.glob("*.jsonl"))
    copy = {p.name: p.read_text() for p in spool.glob("*.jsonl")}
    server = start_mlflow_server(backend, workdir / "server", port=port)
    try:
        first = subprocess.run(cli("sync"), capture_output=True, text=True, timeout=180, env=env)
        for name, text in copy.items():  # a sync cut off before it removed the file: replay it again
            (spool / name).write_text(text)
        again = subprocess.run(cli("sync"), capture_output=True, text=True, timeout=180, env=env)
    finally:
        server.stop()
    run = MlflowClient(backend).get_run(run.info.run_id)
    out = outcome_of("tracking server killed mid-run, back later, `radt-ext sync` (run twice)", backend, run, code,
                     f"{before} stored before sync; status was {status_before} until sync")
    out.details.update(stderr=stderr, sync=[first.returncode, first.stdout + first.stderr],
                       again=[again.returncode, again.stdout + again.stderr], marker=marker.exists(),
                       before=before, status_before=status_before, spooled_lines=spooled_lines)
    return out


@contextlib.contextmanager
def full_dir(path: Path):
    """A directory where nothing can be written: a full 64 KiB tmpfs (root), else a file in its place."""
    path.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)],
                             capture_output=True).returncode == 0
    try:
        if mounted:
            with contextlib.suppress(OSError), open(path / "filler", "wb") as fh:
                fh.write(b"\0" * 256 * 1024)
            how = "full 64 KiB tmpfs"
        else:
            path.rmdir()
            path.write_text("not a directory")
            how = "a file where the spool directory should be"
        yield how
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.levelname + " " + record.getMessage())


def spool_unwritable(workdir: Path) -> Outcome:
    """Server killed mid-run and the spool directory cannot be written."""
    from radt_ext.run.session import WorkloadSession, WorkloadSpec
    from tests.servers import start_mlflow_server

    backend = f"sqlite:///{workdir / 'server.db'}"
    server = start_mlflow_server(backend, workdir / "server")
    spool = workdir / "spool"
    marker = workdir / "done"
    handler = _Lines()
    logging.getLogger("radt_ext").addHandler(handler)
    old = os.environ.get("RADT_EXT_SPOOL_DIR")
    try:
        with full_dir(spool) as how:
            os.environ["RADT_EXT_SPOOL_DIR"] = str(spool)
            s = WorkloadSession(WorkloadSpec(command=[sys.executable, "-c", SLEEP_AND_MARK, "5", str(marker)],
                                             listeners="top:0.05", tracking_uri=server.url))
            s.prepare()
            s.start()
            wait_for(lambda: s.recorder.writer.stored > 20, 60, "points stored before the outage")
            server.stop()
            rc = s.wait()
            code = s.finish()
    finally:
        server.stop()
        logging.getLogger("radt_ext").removeHandler(handler)
        if old is None:
            os.environ.pop("RADT_EXT_SPOOL_DIR", None)
        else:
            os.environ["RADT_EXT_SPOOL_DIR"] = old
    w = s.recorder.writer
    stored = point_counts(backend, s.run_id)[0].total()
    out = Outcome(f"server killed mid-run and spool not writable ({how})", sent=w.sent, stored=stored,
                  spooled=w.spooled, lost=w.lost, exit_code=code,
                  status=MlflowClient(backend).get_run(s.run_id).info.status,
                  notes="one error line; workload finished")
    out.details.update(lines=handler.lines, rc=rc, marker=marker.exists(), writer_stored=w.stored)
    return out


def sqlite_lock_held(workdir: Path, hold_s: float = 24.0, points: int = 50) -> Outcome:
    """Another connection holds the SQLite file exclusively for longer than MLflow's 20 s busy_timeout."""
    import sqlite3
    import threading

    from radt_ext.store.writer import MetricWriter

    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run("0").info.run_id
    db = sqlite3.connect(str(workdir / "mlflow.db"), timeout=0, check_same_thread=False)
    db.execute("BEGIN EXCLUSIVE")
    writer = MetricWriter(client, run_id, uri, flush_interval=0.05, spool_path=workdir / "spool" / "r.jsonl").start()
    for i in range(points):
        writer.add("system/x_count", float(i), 1_700_000_000_000 + i, i)
    timer = threading.Timer(hold_s, db.rollback)
    timer.start()
    writer.close()
    timer.join()
    counts, dups = point_counts(uri, run_id)
    return Outcome(f"SQLite file locked by another writer for {hold_s:g} s (MLflow's busy_timeout is 20 s)",
                   sent=writer.sent, stored=sum(counts.values()), spooled=writer.spooled, lost=writer.lost,
                   duplicates=dups, notes=f"{writer.lock_retries} lock retries by the writer",
                   details={"lock_retries": writer.lock_retries, "writer_stored": writer.stored})


SCENARIOS = {
    "workload_raises": workload_raises,
    "sigint_run": lambda d: signal_run(d, signal.SIGINT),
    "sigterm_run": lambda d: signal_run(d, signal.SIGTERM),
    "listener_raises": listener_raises,
    "tool_disappears": tool_disappears,
    "sqlite_contention": sqlite_contention,
    "sqlite_lock_held": sqlite_lock_held,
    "server_outage": server_outage,
    "spool_unwritable": spool_unwritable,
}


def as_json(o: Outcome) -> str:
    return json.dumps({k: v for k, v in o.__dict__.items() if k != "details"})


# ----------------------------------------------------------------------------- sweep: signal, then resume

# runs until the release file exists; its tree tries to escape as TREE's does
HELD = textwrap.dedent("""
    import os, subprocess, sys, time, radt_ext
    pidfile, release = sys.argv[1], sys.argv[2]
    stubborn = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
    escaped = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
    with open(pidfile, "a") as f:
        f.write(f"{os.getpid()} {stubborn.pid} {escaped.pid}\\n")
    t = time.time()
    while not os.path.exists(release) and time.time() - t < 300:
        radt_ext.log_progress(samples=1)
        time.sleep(0.05)
""")


def sweep_spec(workdir: Path) -> Path:
    script = workdir / "held.py"
    script.write_text(HELD)
    quick = f"{sys.executable} -c 'import time; time.sleep(0.3)'"
    held = f"{sys.executable} {script} {workdir / 'pids'} {workdir / 'release'}"
    spec = workdir / "sweep.yaml"
    spec.write_text(yaml_dump({
        "name": "faults", "experiment": "faults", "devices": ["0"], "interval": 0.1,
        "listeners": "top:0.1", "child_listeners": "top:0.1",
        "workloads": {"quick": {"command": quick}, "held": {"command": held}},
        "groups": [{"name": "first", "workloads": ["quick"], "modes": ["exclusive"]},
                   {"name": "held-pair", "workloads": ["held", "held"], "modes": ["mps"]},
                   {"name": "after", "workloads": ["quick", "quick"], "modes": ["naive"]}],
    }))
    return spec


def yaml_dump(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def sweep_counts(uri: str) -> tuple[dict, int, int, int]:
    """{(group, status): runs}, points sent, stored, duplicated over every run of the store."""
    by: Counter = Counter()
    sent = stored = dups = 0
    for run in runs_in(uri):
        by[(run.data.tags.get("sweep.group") or run.data.tags.get("mlflow.runName", "?"), run.info.status)] += 1
        o = outcome_of("", uri, run, None)
        if o.sent >= 0:
            sent, stored, dups = sent + o.sent, stored + o.stored, dups + o.duplicates
    return dict(by), sent, stored, dups


def sweep_signal_and_resume(workdir: Path, sig: int, standin_env: dict[str, str]) -> Outcome:
    """`radt-ext sweep` gets a signal in its MPS group; a second `radt-ext sweep` resumes there."""
    from radt_ext.collocation.mps import mps_processes

    env = base_env(workdir, **standin_env)
    uri = env["MLFLOW_TRACKING_URI"]
    spec = sweep_spec(workdir)
    pidfile = workdir / "pids"
    proc = subprocess.Popen(cli("sweep", str(spec)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=workdir)
    pids: list[int] = []
    try:
        wait_for(lambda: pidfile.exists() and len(pidfile.read_text().splitlines()) == 2, 120,
                 "both held workloads", proc)
        pids = [int(p) for p in pidfile.read_text().split()]
        daemons = [p.pid for p, e in mps_processes() if e and "radt-ext-mps" in e.get("CUDA_MPS_PIPE_DIRECTORY", "")]
        time.sleep(0.5)
        proc.send_signal(sig)
        code = proc.wait(timeout=90)
        first_out = proc.stdout.read() + proc.stderr.read()
        survivors = alive(pids + daemons)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(pids)
    after_signal = sweep_counts(uri)[0]
    (workdir / "release").write_text("go")
    pidfile.unlink()
    resumed = subprocess.run(cli("sweep", str(spec)), capture_output=True, text=True, env=env, cwd=workdir,
                             timeout=300)
    second = [int(p) for p in pidfile.read_text().split()] if pidfile.exists() else []
    second_left = alive(second)  # the held workloads exited normally; their escaped helpers must not stay
    kill_all(second)
    by, sent, stored, dups = sweep_counts(uri)
    out = Outcome(f"{signal.Signals(sig).name} to `radt-ext sweep` in an MPS group, then resumed", sent=sent,
                  stored=stored, duplicates=dups, exit_code=code,
                  status="{} then {} (resumed, exit code {})".format(
                      "/".join(sorted({st for (g, st) in after_signal if g == "held-pair"})),
                      "FINISHED" if by.get(("held-pair", "FINISHED")) else "not finished", resumed.returncode),
                  notes=f"{len(pids)} workload processes + {len(daemons)} MPS daemon(s), {len(survivors)} left")
    out.details.update(pids=pids, daemons=daemons, survivors=survivors, first_out=first_out,
                       second=second, second_left=second_left,
                       after_signal=after_signal, final=by, resumed=[resumed.returncode,
                                                                     resumed.stdout + resumed.stderr])
    return out
