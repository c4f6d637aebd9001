"""No signal at any moment leaves a RUNNING run or a process behind: real `radt-ext run` processes,
real signals (SIGINT, SIGTERM at many moments; SIGKILL of radt-ext itself), a real SQLite store."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from radt_ext.workload_api.markers import TAG_MONITOR_RUN
from radt_ext.run.spills import PARTIAL, TAG_PARTIAL, run_dir
from radt_ext.run.watchdog import TAG_ENDED_BY
from radt_ext.store import timelines
from tests.radt_ext.helpers import full_rate, radt

pytestmark = pytest.mark.alone  # it times a stop after a signal: no other test runs beside it

# a workload that starts a run of its own and a child process, then waits to be stopped
WORKLOAD = textwrap.dedent("""
    import subprocess, sys, time, mlflow
    mlflow.set_experiment("work")
    with mlflow.start_run(run_name="work"):
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open(sys.argv[1], "w") as fh:
            fh.write(f"{kid.pid}")
        time.sleep(300)
""")
ENDED = {"FINISHED", "KILLED", "FAILED"}


def _env(uri: str, mark: str) -> dict:
    return {**os.environ, "MLFLOW_TRACKING_URI": uri, "RADT_TEST_MARK": mark}


def _marked(mark: str) -> list[psutil.Process]:
    """Processes (not zombies) that carry this test's mark in their environment."""
    out = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("RADT_TEST_MARK") == mark:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


def _start(uri: str, mark: str, pidfile, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "run", "-l", "top", "-i", "0.1", "--",
                             sys.executable, "-c", WORKLOAD, str(pidfile)], env=_env(uri, mark), **kw)


def _all_runs(uri: str):
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def _trial(tmp_path, sig: int, delay: float, after_workload: bool = False):
    """Start, signal `delay` s after the start (or after the workload's own run and child exist), wait:
    (delay, exit code, {run name: status}, processes left, stderr)."""
    name = f"{sig}-{delay}{'-w' if after_workload else ''}"
    uri = f"sqlite:///{tmp_path / f'{name}.db'}"
    mark, pidfile = uuid.uuid4().hex, tmp_path / f"{name}.pid"
    proc = _start(uri, mark, pidfile, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if after_workload:
        _wait_for(lambda: (pidfile.exists() and pidfile.read_text()) or proc.poll() is not None, 300,
                  "the workload to start")
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=180)
    left = [p.pid for p in _marked(mark)]
    for p in _marked(mark):  # do not leave them to other tests even when this one fails
        p.kill()
    return delay, proc.returncode, _statuses(uri[len("sqlite:///"):]), left, err


def _statuses(path: str) -> dict[str, str]:
    """{run name, or "radt-ext" for radt-ext's own run: status}, read from the file without MLflow: a
    workload whose own MLflow was making the new store when the signal came leaves it half made (MLflow
    makes a store in place), and MLflow would go on migrating it on open."""
    if not os.path.exists(path):
        return {}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT r.name, r.status, (SELECT COUNT(*) FROM tags t WHERE t.run_uuid = r.run_uuid "
                            "AND t.key = ?) FROM runs r", (TAG_MONITOR_RUN,)).fetchall()
    except sqlite3.OperationalError:  # no runs table yet
        return {}
    finally:
        conn.close()
    return {("radt-ext" if not followed else name): status for name, status, followed in rows}


def _time_to_workload(tmp_path) -> float:
    """Seconds from starting `radt-ext run` to its workload running, on this machine now."""
    uri = f"sqlite:///{tmp_path / 'calibration.db'}"
    mark, pidfile = uuid.uuid4().hex, tmp_path / "calibration.pid"
    start = time.time()
    proc = _start(uri, mark, pidfile, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: pidfile.exists() and pidfile.read_text(), 300, "the workload to start")
        return time.time() - start
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=180)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 24 starts of radt-ext; minutes where starting Python is slow
def test_sigint_and_sigterm_at_any_moment_end_every_run_and_every_process(tmp_path):
    # 0 to 5 s after start, or to just past the workload's start where starting Python takes longer here:
    # signals land while Python starts, while radt-ext prepares (store, run, machine description), while the
    # workload starts and while it runs
    span = max(5.0, _time_to_workload(tmp_path) + 1.0)
    trials = [(signal.SIGINT if i % 2 else signal.SIGTERM, round(i * span / 20, 2), False) for i in range(21)]
    # how long starting takes varies from start to start on a loaded machine: two trials signal once the
    # workload's own run and child exist, so the workload's run is always among those signalled
    trials += [(signal.SIGTERM, 0.3, True), (signal.SIGINT, 0.3, True)]
    results = [_trial(tmp_path, sig, delay, after) for sig, delay, after in trials]
    for (sig, _, _), (delay, code, statuses, left, err) in zip(trials, results):
        where = f"{signal.Signals(sig).name} after {delay:g} s: exit {code}, runs {statuses}"
        assert not left, f"{where}: processes left {left}"
        assert set(statuses.values()) <= ENDED, where
        last = (err.decode(errors="replace") if isinstance(err, bytes) else err).strip().splitlines()[-1:]
        if "radt-ext" in statuses:  # once radt-ext's run exists, the signal is what ended it
            assert statuses["radt-ext"] == "KILLED" and code != 0, f"{where}\n{err[-2000:]}"
        elif last and "recorded with its samples in" in last[0]:  # stopped before MLflow made it: spooled
            assert last[0].startswith("radt-ext: run KILLED") and code != 0, where
        else:
            assert not statuses, f"{where}\n{err[-2000:]}"
    assert not results[0][2], "a signal at once should stop radt-ext before any run exists"
    for (sig, _, _), (_, code, statuses, _, err) in zip(trials[-2:], results[-2:]):
        where = f"{signal.Signals(sig).name} while the workload ran: exit {code}, runs {statuses}\n{err[-2000:]}"
        assert statuses.get("work") in ENDED, where


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _running_workload(tmp_path, tracking_uri):
    mark = uuid.uuid4().hex
    pidfile = tmp_path / "pid"
    proc = _start(tracking_uri, mark, pidfile, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for(lambda: pidfile.exists() and pidfile.read_text(), 180, "the workload to start")
    _wait_for(lambda: len(_all_runs(tracking_uri)) == 2, 60, "the workload's own run")
    time.sleep(1.0)  # some samples stored
    return proc, mark


def _watchdog(proc) -> psutil.Process:
    kids = [p for p in psutil.Process(proc.pid).children() if "radt_ext.run.watchdog" in " ".join(p.cmdline())]
    assert len(kids) == 1
    return kids[0]


SPILL_CHUNK = 8  # points per spill chunk in the SIGKILL test: chunks reach the disk within a second


def _spilled(directory: str) -> int:
    """The points in the whole chunks of the spill files in a run's spill folder (written meanwhile)."""
    total = 0
    for path in Path(directory).glob(f"{timelines.SPILL_PREFIX}*{timelines.SPILL_SUFFIX}"):
        try:
            total += sum(len(chunk[1]) for chunk in timelines.read_spill(path))
        except OSError:
            pass
    return total


def test_sigkill_of_radt_ext_stops_the_workload_and_ends_the_runs_killed(tmp_path, tracking_uri, monkeypatch):
    monkeypatch.setenv(timelines.ENV_CHUNK, str(SPILL_CHUNK))
    proc, mark = _running_workload(tmp_path, tracking_uri)
    watchdog = _watchdog(proc)
    argv = watchdog.cmdline()
    spill_root = argv[argv.index("--spill-dir") + 1]
    (work_id,) = [r.info.run_id for r in _all_runs(tracking_uri) if TAG_MONITOR_RUN in r.data.tags]
    try:
        _wait_for(lambda: _spilled(run_dir(spill_root)) >= 2 * SPILL_CHUNK
                  and _spilled(run_dir(spill_root, work_id)) >= SPILL_CHUNK, 120, "chunks spilled to disk")
        flushed = {"radt-ext": _spilled(run_dir(spill_root)), "work": _spilled(run_dir(spill_root, work_id))}
        proc.kill()
        proc.wait(timeout=30)
        _wait_for(lambda: not _marked(mark), 60, "the workload's processes to end")
        watchdog.wait(timeout=60)
        runs = {r.info.run_name: r for r in _all_runs(tracking_uri)}
        assert {r.info.status for r in runs.values()} == {"KILLED"}
        monitor = next(r for r in runs.values() if TAG_MONITOR_RUN not in r.data.tags)
        assert "was killed" in monitor.data.tags[TAG_ENDED_BY]
        assert runs["work"].data.tags[TAG_MONITOR_RUN] == monitor.info.run_id
        client = MlflowClient(tracking_uri)
        history = client.get_metric_history(monitor.info.run_id, "system/proc_cpu_pct")
        assert history  # the samples it had stay
        # the points its spill files held on disk are each run's timeline artifact: every whole chunk
        # written before the kill (and any written after the count above), none of the chunk in memory
        for name, run in (("radt-ext", monitor), ("work", runs["work"])):
            rid = run.info.run_id
            assert [f.path for f in client.list_artifacts(rid, timelines.ARTIFACT_DIR)] == [
                f"{timelines.ARTIFACT_DIR}/{timelines.SYSTEM_FILE}"], name
            keys = list(timelines.read(client, rid))
            points = sum(len(h) for h in timelines.history(client, rid, keys).values())
            assert points >= flushed[name] and points % SPILL_CHUNK == 0, (name, points, flushed)
            assert run.data.tags[TAG_PARTIAL] == PARTIAL, name
        assert not os.path.exists(spill_root)  # removed, as the normal end removes each spill file
    finally:
        for p in _marked(mark):
            p.kill()


def test_a_run_whose_radt_ext_and_watchdog_were_killed_is_ended_by_the_next_run(tmp_path, tracking_uri):
    proc, mark = _running_workload(tmp_path, tracking_uri)
    watchdog = _watchdog(proc)
    try:
        watchdog.kill()  # as a kill of the whole control group would
        proc.kill()
        proc.wait(timeout=30)
    finally:
        for p in _marked(mark):
            p.kill()
    assert {r.info.status for r in _all_runs(tracking_uri)} == {"RUNNING"}
    res = radt("run", "-l", "top", "--", sys.executable, "-c", "pass")
    assert res.returncode == 0, res.stderr[-3000:]
    runs = _all_runs(tracking_uri)
    assert len(runs) == 3
    orphans = [r for r in runs if r.info.status == "KILLED"]
    assert len(orphans) == 2  # radt-ext's run and the workload's own
    assert any("ended by a later radt-ext run" in r.data.tags.get(TAG_ENDED_BY, "") for r in orphans)


# a workload that takes no notice of SIGINT and SIGTERM, with a run of its own open: only SIGKILL ends it
DEAF = textwrap.dedent("""
    import signal, sys, time, mlflow
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    mlflow.set_experiment("work")
    mlflow.start_run(run_name="work")
    open(sys.argv[1], "w").write("x")
    time.sleep(300)
""")


def test_a_workload_that_ignores_the_stop_is_killed_and_its_run_still_ends(tmp_path, tracking_uri):
    """The grace period before SIGKILL uses up the stop's budget: the run the workload left RUNNING is
    ended all the same, after radt-ext's own."""
    mark, pidfile = uuid.uuid4().hex, tmp_path / "pid"
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "run", "-l", "top", "-i", "0.1", "--",
                             sys.executable, "-c", DEAF, str(pidfile)], env=_env(tracking_uri, mark),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: pidfile.exists() or proc.poll() is not None, 180, "the workload to start")
        _wait_for(lambda: len(_all_runs(tracking_uri)) == 2, 60, "the workload's own run")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
        left = [p.pid for p in _marked(mark)]
    finally:
        for p in _marked(mark):
            p.kill()
    assert proc.returncode == 128 + signal.SIGKILL, err[-3000:]
    assert not left
    runs = {r.info.run_name: r for r in _all_runs(tracking_uri)}
    assert {r.info.status for r in runs.values()} == {"KILLED"}, err[-3000:]
    assert "the workload left it RUNNING" in runs["work"].data.tags[TAG_ENDED_BY]
    assert "ended " + runs["work"].info.run_id in err


def _threads_but_main(pid: int) -> list[int]:
    return [t.id for t in psutil.Process(pid).threads() if t.id != pid]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tgkill (a signal to one thread) is Linux's")
def test_a_stop_signal_the_kernel_hands_to_another_thread_still_stops_the_run(tmp_path, tracking_uri):
    """A signal sent to the process may land on any of its threads; radt-ext's main thread, waiting for
    the workload, must still act on it."""
    import ctypes

    proc, mark = _running_workload(tmp_path, tracking_uri)
    try:
        thread = _threads_but_main(proc.pid)[-1]
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(TGKILL.get(os.uname().machine, 234), proc.pid, thread, signal.SIGINT) == 0
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("radt-ext did not act on a SIGINT handed to one of its other threads")
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _marked(mark):
            p.kill()
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    assert {r.info.status for r in _all_runs(tracking_uri)} <= ENDED


TGKILL = {"x86_64": 234, "aarch64": 131}  # the tgkill system call's number


# the workload notes that it started, then waits to be stopped
STARTED_THEN_WAITS = "import sys, time\nopen(sys.argv[1], 'w').write('x')\ntime.sleep(300)\n"


def test_a_workload_stopped_before_the_store_was_reached_is_recorded_through_the_spool(tmp_path):
    """The server answers radt-ext's checks, then is gone when radt-ext goes to make its run; the
    workload, already running, is stopped: its run is spooled, KILLED with its samples, and
    `radt-ext sync` makes it in the store once the server is back."""
    from tests.servers import start_mlflow_server

    backend = f"sqlite:///{tmp_path / 'server.db'}"
    server = start_mlflow_server(backend, tmp_path / "server")
    port = int(server.url.rsplit(":", 1)[1])
    spool, started = tmp_path / "spool", tmp_path / "started"
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.url, "RADT_EXT_SPOOL_DIR": str(spool)}
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "run", "-l", "top", "-i", "0.05",
                             "--run-name", "early", "--", sys.executable, "-c", STARTED_THEN_WAITS, str(started)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: started.exists() or proc.poll() is not None, 120, "the workload to start")
        os.killpg(server.proc.pid, signal.SIGKILL)  # radt-ext is still importing MLflow
        server.stop()
        time.sleep(1.0)  # samples taken
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    (path,) = spool.glob("*.jsonl")
    last = err.strip().splitlines()[-1]
    assert last.startswith("radt-ext: run KILLED") and str(path) in last and "radt-ext sync" in last, err[-3000:]
    assert MlflowClient(backend).search_runs(["0"]) == []  # nothing reached the store

    server = start_mlflow_server(backend, tmp_path / "server", port=port)
    try:
        synced = subprocess.run([sys.executable, "-m", "radt_ext.cli", "sync"], env=env, capture_output=True,
                                text=True, timeout=180)
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert "made run" in synced.stdout
        path.write_text("")  # a later sync finds nothing new (the file is gone once synced)
        again = subprocess.run([sys.executable, "-m", "radt_ext.cli", "sync"], env=env, capture_output=True,
                               text=True, timeout=180)
        assert again.returncode == 0, again.stdout + again.stderr
        client = MlflowClient(server.url)
        (run,) = client.search_runs(["0"])
        full = timelines.read(client, run.info.run_id)  # the run's artifact timelines/system.parquet
        stored = {key: client.get_metric_history(run.info.run_id, key) for key in full or ()}
        history = full_rate(server.url, run.info.run_id, "system/proc_cpu_pct")
    finally:
        server.stop()
    assert run.info.status == "KILLED" and run.info.run_name == "early"
    assert run.data.tags["radt_ext.exit_code"] == str(-signal.SIGTERM)
    assert "radt_ext.timelines_error" not in run.data.tags  # its file is the run's artifact now
    # the full-rate timelines reached the run sync made: every point the run recorded, the store's
    # shape of them among them (a stop's bounded end leaves a short run, whose shape may keep every point)
    assert full and "system/proc_cpu_pct" in full
    assert sum(map(len, full.values())) == int(run.data.tags["radt_ext.metrics_full_rate"])
    for key, points in stored.items():
        assert {(m.timestamp, m.step, m.value) for m in points} <= set(full[key]), key
    assert sum(map(len, full.values())) >= sum(map(len, stored.values()))
    assert [(h.timestamp, h.step, h.value) for h in history] == full["system/proc_cpu_pct"]
    assert len(history) >= 2  # the samples it had, at their own times
    assert run.info.start_time <= min(h.timestamp for h in history)
