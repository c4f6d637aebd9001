"""A workload session: one command, one MLflow run, listeners sampling from outside.

    session = WorkloadSession(WorkloadSpec(command=[...], listeners="nvml,top"))
    session.prepare()   # every check that can fail on bad input, and the run; nothing runs yet
    session.start()     # listeners open, then the child process starts
    rc = session.wait()
    session.finish()    # flush, summaries, status; returns the exit code to use

`run()` (what `radt-ext run` calls) starts the workload first: bad input is refused by checks that
need no MLflow (store_probe.py), then the workload and the listeners start, and only then, on a thread
of its own, is MLflow imported, a SQLite store that does not exist yet made (fresh_store.py), an
experiment still to be made made, and the run created or joined, while the workload starts up; the
listeners' points wait in the writer until the run exists. Where those checks cannot tell (a store
other than SQLite or a server) it prepares first, as collocation does.
SIGINT/SIGTERM/SIGHUP are handled from before the run exists to after its status is set, each turned
into a clean stop of the whole child process tree: SIGTERM at once, SIGKILL after KILL_GRACE_S. After
a stop, radt-ext's own store work is bounded (STOP_BUDGET_S from the signal): a run not yet made by
then goes to the spool with its samples (`radt-ext sync` makes it), and the end of a made run that the
store does not take in time is spooled too. Collocation starts several prepared sessions together.

Runs: radt-ext records the whole command into its own run (created, or the one `mlflow run` or
`--run-id` hands over, which the workload then receives in MLFLOW_RUN_ID). Runs the workload starts
itself are found and given the points of their own span (workload_runs.py); a watchdog process
ends everything as KILLED if radt-ext itself is killed outright (watchdog.py).
"""
from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field

# Only what the way to the workload's start needs is imported here (`radt-ext run` starts it within a
# second on a loaded host); the rest is imported where it is used, once the workload runs.
from listeners.base import Target
from radt_ext.store import fresh_store, store_probe
from radt_ext.store.client import _not_in_store, _deleted, experiment_choice  # no MLflow, no HTTP imports
from radt_ext.errors import UsageError
from radt_ext.workload_api.markers import ENV_MONITOR_RUN, ENV_RUN_ID_FILE, ENV_STARTS_FILE, write_run_id
from radt_ext.workload_api.progress import ENV as PROGRESS_ENV
from radt_ext.sampling.selection import check_input, choose, select_listeners
from radt_ext.run.progress_env import progress_env, progress_tags, rate_timeline
from radt_ext.workload_api.autoprogress import hook_missing
from radt_ext.workload_api.progress_sources import counting_off
from radt_ext.run.signals import STOP_SIGNALS, SignalRelay, wait_child
from radt_ext.run.spills import spill_root
from radt_ext.run.watchdog import Watchdog

log = logging.getLogger(__name__)
STORE_READ_TIMEOUT_S = 60.0  # a run's report or its own metrics, read back at its end
WORKLOAD_RUNS_TIMEOUT_S = 300.0  # the runs a workload opened: ended, their last points and summaries written
ENV_ACTIVE = ENV_MONITOR_RUN  # set for the workload: the run id already being monitored
KILL_GRACE_S = 2.0  # SIGTERM → SIGKILL of the workload's tree: all of a stop fits in ~5 s on a loaded host
LEFT_RUNS_TIMEOUT_S = 20.0  # after a stop, past its budget: the workload's runs left RUNNING ended all the same
STOP_BUDGET_S = 3.0  # from a stop signal to the end of radt-ext's store work (then spooled)
STOP_STATUS_S = 1.0  # of that budget, kept for the run's summaries and status
RUN_SIGNALS = (*STOP_SIGNALS, signal.SIGHUP)  # a closed terminal stops the workload too


class Interrupted(Exception):
    """A stop signal arrived before the workload started and before any run was created: nothing ran,
    nothing was recorded."""

    def __init__(self, signum: int, uri: str | None = None):
        where = f" in {uri}" if uri else ""
        super().__init__(f"stopped by {signal.Signals(signum).name} before the workload started; "
                         f"nothing ran and nothing was recorded{where}")
        self.signum = signum


@dataclass
class WorkloadSpec:
    command: list[str]
    listeners: str | None = None
    interval: float | None = None
    experiment_name: str | None = None
    run_name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    tracking_uri: str | None = None
    run_id: str | None = None  # join this run; else MLFLOW_RUN_ID; else create one
    parent_run_id: str | None = None  # create the run nested under this one
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the workload
    cwd: str | None = None
    t0: float | None = None  # common time origin of a collocation group
    full_rate_store: bool | None = None  # every point into the store (else its shape); None: RADT_EXT_FULL_RATE_STORE
    launch: list[str] = field(default_factory=list)  # a launcher put before the command (it execs the command)
    progress: bool | None = None  # count an unmodified Python script's work (autoprogress); None: unless RADT_EXT_NO_PROGRESS


def _import_for_threads() -> None:
    """What the writer and run-following threads import lazily, imported here in the main thread first:
    two threads importing MLflow's modules at once can deadlock on Python's import locks."""
    import mlflow.entities  # noqa: F401
    import mlflow.utils.search_utils  # noqa: F401

    try:
        import radt_ext.store.bulk_metrics  # noqa: F401
    except Exception:
        pass  # the writer then says why, and uses log_batch


# What the run's end imports (the timeline's Parquet, the report and its figures): imported while the
# workload runs, so the seconds after its exit hold only the run's own work (docs/benchmarks, overhead_plain).
END_OF_RUN_MODULES = ("pyarrow.parquet", "radt_ext.report.build", "mlflow.utils.search_logged_model_utils")


def _import_for_the_end(warm: bool = True) -> None:
    """`warm`: also draw a small report once (the workload still runs: its end would pay for it otherwise)."""
    import importlib

    for name in END_OF_RUN_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the end imports it again and says what is wrong there
            pass
    if not warm:
        return
    try:
        from radt_ext.report.build import warm as draw_once

        draw_once()
    except Exception:  # noqa: BLE001 - the report itself says what is wrong, at the end
        pass


def _runnable(program: str, cwd: str | None) -> bool:
    """Whether exec would find the program (a path from cwd, else on PATH)."""
    import shutil

    if os.sep in program:
        return os.access(os.path.join(cwd or "", program), os.X_OK)
    return shutil.which(program) is not None


def exit_code(returncode: int) -> int:
    """A child killed by signal N exits the way a shell reports it: 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class WorkloadSession:
    keep_series = None  # a compiled pattern: metric series the recorder keeps in memory (see Recorder)
    keep_read_timelines = False  # the timeline file the run's report read stays in `read_timelines` (a group's report)
    read_timelines = None
    keep_stderr_tail = False  # pass the child's stderr through a pipe and put its end on a failed run

    def __init__(self, spec: WorkloadSpec):
        if not spec.command:
            raise UsageError("no command to run; write it after `--`, e.g. radt-ext run -- python train.py")
        self.spec = spec
        self.client = None  # an MlflowClient once the store is reached
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.proc: subprocess.Popen | None = None
        self.recorder: Recorder | None = None
        self.killed_by: int | None = None
        self.returncode: int | None = None
        self.summary: dict[str, float] = {}
        # a group's: when the process ended (the run's end time) and figures of its own (summary/wait_s)
        self.ended_at: float | None = None
        self.reap_later = False  # a group's: its watchdog's exit waited for once the group's run has ended
        self.extra_summary: dict[str, float] = {}
        self._workdir = tempfile.mkdtemp(prefix="radt-ext-")
        self.progress_path = os.path.join(self._workdir, "progress.jsonl")
        self.marks = None  # what the workload reported (radt_ext.workload_api.progress.Marks), read at the end
        self.hook_missing: str | None = None  # why the start-up hook cannot count here (said at start and in the note)
        self.starts_path = os.path.join(self._workdir, "starts.jsonl")
        self.run_id_path = os.path.join(self._workdir, "run_id")
        self.marker: str | None = None  # the workload's RADT_EXT_ACTIVE: the run id, or a key while there is none
        self.final_status: str | None = None
        self.joined = False  # the run was handed over (mlflow run, --run-id): the workload gets MLFLOW_RUN_ID
        self.machine_tags: dict[str, str] = {}
        self.workload_runs: WorkloadRuns | None = None
        self.watchdog: Watchdog | None = None
        self.timings: dict[str, float] = {}  # time.time() of each step (benchmarks/startup/startup.py reads them)
        env_visible = spec.env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.target = Target(pid=None, cuda_visible_devices=env_visible)
        self._listeners = []
        self._skipped: dict[str, str] = {}
        self.stderr_tail = None
        self.spooled: str | None = None  # why the run went to the spool instead of the store (open_run_alongside)
        self.fresh_store = False  # a SQLite store still to be made: made alongside the workload
        self.experiment_name: str | None = None  # an experiment still to be made: the workload gets its name
        self.stopped_at: float | None = None  # time.monotonic() of the first stop signal
        self.workload_runs_left: str | None = None  # why the workload's runs were not closed in time
        self.abandoned = False  # stopped before the store was set up: the run went to the spool
        self._opener: threading.Thread | None = None
        self._open_lock = threading.Lock()
        self._open_error: BaseException | None = None
        self._opened = False
        self._announce = None  # run()'s announce(session), called by the opener once the run exists

    # -- before anything runs -------------------------------------------------------
    def check(self) -> bool:
        """Every check of bad input that needs no MLflow. True when the run's experiment (or the
        handed-over run) is known, so the workload may start before MLflow is imported; False when
        only MLflow can tell (then `prepare()` first)."""
        spec = self.spec
        self.uri = store_probe.tracking_uri(spec.tracking_uri)
        selections = check_input(spec.listeners, spec.interval, self.target)
        if selections is None:
            self._listeners = None  # every available one: probed once the workload starts (NVML's start, …)
        else:
            self._listeners, self._skipped = choose(selections, spec.interval, self.target)
        probe = store_probe.StoreProbe(self.uri)  # unknown scheme, malformed URI, no server, credentials
        if not (probe.readable or probe.fresh) or spec.parent_run_id:
            return False
        run_id = spec.run_id or os.environ.get("MLFLOW_RUN_ID")
        if run_id:
            run = False if probe.fresh else probe.run(run_id)
            if run is False:
                raise UsageError(f"run {run_id} (from MLFLOW_RUN_ID or --run-id) is not in {self.uri}; "
                                 "unset MLFLOW_RUN_ID to create a new run")
            if run is None:
                return False
            self.run_id, self.experiment_id, self.joined, self.marker = run_id, run.experiment_id, True, run_id
            return True
        name, env_id = experiment_choice(spec.experiment_name)
        self.fresh_store = probe.fresh
        if probe.fresh:  # MLflow makes it with its Default experiment, id 0
            if env_id and env_id != "0":
                raise _not_in_store(env_id)
            experiment = False if name is not None else store_probe.Experiment("0", False)
        elif name is None:
            experiment = probe.experiment(experiment_id=env_id or "0")
            if experiment is False and env_id:
                raise _not_in_store(env_id)
        else:
            experiment = probe.experiment(name=name)
            if experiment and experiment.deleted:
                raise _deleted(name)
        if experiment is None or (experiment is False and name is None):
            return False  # only MLflow can tell
        if experiment is False:
            self.experiment_name = name  # made alongside; the workload is told its name
        else:
            self.experiment_id = experiment.experiment_id
        self.marker = uuid.uuid4().hex
        return True

    def prepare(self) -> "WorkloadSession":
        spec = self.spec
        from radt_ext.store.client import connect, tracking_uri

        self.uri = getattr(self, "uri", None) or tracking_uri(spec.tracking_uri)
        if not self._listeners and not self._skipped:
            self._listeners, self._skipped = select_listeners(spec.listeners, spec.interval, self.target)
        self.client = connect(self.uri)
        if self.killed_by is not None:
            raise Interrupted(self.killed_by, self.uri)
        self._open_run()
        return self

    def _open_run(self) -> None:
        """End orphans, then create the run or join the handed-over one, and describe it."""
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

        from radt_ext.run.watchdog import end_orphans, owner_tags
        from radt_ext.store.client import experiment_id_for

        spec = self.spec
        try:
            end_orphans(self.client)  # runs on this host whose radt-ext and watchdog were both killed
        except Exception:
            pass  # housekeeping; never a reason not to run
        run_id = self.run_id if self.joined else (
            spec.run_id or (os.environ.get("MLFLOW_RUN_ID") if spec.parent_run_id is None else None))
        if run_id:
            try:
                run = self.client.get_run(run_id)
            except Exception:
                raise UsageError(f"run {run_id} (from MLFLOW_RUN_ID or --run-id) is not in {self.uri}; "
                                 "unset MLFLOW_RUN_ID to create a new run") from None
            self.run_id, self.experiment_id, self.joined = run_id, run.info.experiment_id, True
            self.log_tags(owner_tags())  # before it is RUNNING again: an orphan is always recognisable
            if run.info.status != "RUNNING":
                self.client.update_run(run_id, status="RUNNING")
        else:
            if self.experiment_id is None:
                self.experiment_id = experiment_id_for(self.client, spec.experiment_name)
            tags = owner_tags()
            if spec.parent_run_id:
                tags[MLFLOW_PARENT_RUN_ID] = spec.parent_run_id
            if spec.run_name:
                tags[MLFLOW_RUN_NAME] = spec.run_name
            started = self.timings.get("workload_started")  # running already: its run starts with its process
            run = self.client.create_run(self.experiment_id, start_time=int(started * 1000) if started else None,
                                         tags=tags, run_name=spec.run_name)
            self.run_id = run.info.run_id
        self.marker = self.marker or self.run_id
        try:
            self._describe()
        except BaseException:
            self.client.set_terminated(self.run_id, "FAILED")
            raise

    def _describe(self) -> None:
        spec = self.spec
        if self.killed_by is not None and self.proc is None:
            return  # stopped already: do not spend seconds describing the machine
        from radt_ext import view
        from radt_ext.sampling import machine

        tags = self.machine_tags = machine.describe()
        tags = dict(tags)
        tags.update({
            "radt_ext.command": shlex.join(spec.command)[:5000],
            "radt_ext.listeners": ",".join(f"{lst.name}:{lst.interval:g}" for lst in self._listeners),
        })
        for name, reason in self._skipped.items():
            tags[f"radt_ext.listener_skipped.{name}"] = reason[:4000]
        # its place in the comparison view (a collocation child has its group's, in spec.tags)
        tags[view.ORDER_TAG] = view.order_key(spec.tags.get("collocation.mode"), spec.tags.get("variant")
                                              or spec.tags.get("recipe") or spec.run_name, f"{time.time():014.3f}")
        tags.update(spec.tags)
        self.log_tags(tags)
        if spec.params:
            from mlflow.entities import Param

            self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in spec.params.items()])

    def log_tags(self, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)) for k, v in tags.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, tags=items[i:i + 100])

    def child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.spec.env)
        if self.experiment_id is None:  # still to be made: by name (MLflow makes it if the workload is first)
            env.pop("MLFLOW_EXPERIMENT_ID", None)
            env["MLFLOW_EXPERIMENT_NAME"] = self.experiment_name
        else:
            env["MLFLOW_EXPERIMENT_ID"] = self.experiment_id  # the default; the workload's set_experiment wins
            env.pop("MLFLOW_EXPERIMENT_NAME", None)  # the id wins; both set and differing is an MLflow error
        env.update({
            "MLFLOW_TRACKING_URI": self.uri,
            PROGRESS_ENV: self.progress_path,
            ENV_ACTIVE: self.marker or self.run_id,
            ENV_RUN_ID_FILE: self.run_id_path,
            ENV_STARTS_FILE: self.starts_path,
        })
        progress_env(env, self.progress_on())
        if self.joined:
            env["MLFLOW_RUN_ID"] = self.run_id  # the workload's start_run() resumes the handed-over run
        else:
            env.pop("MLFLOW_RUN_ID", None)  # its start_run() makes its own run, in any experiment
        return env

    def progress_on(self) -> bool:
        return self.spec.progress if self.spec.progress is not None else not counting_off(os.environ)

    # -- running ----------------------------------------------------------------------
    def start(self) -> "WorkloadSession":
        """Start the workload and the listeners; with no run yet (`run()`), their points wait for it."""
        self.marker = self.marker or self.run_id
        if self.run_id is not None:
            write_run_id(self.run_id_path, self.run_id)
        if self.client is not None:
            _import_for_threads()
        try:  # before the workload exists: it never runs unwatched
            self.watchdog = Watchdog(self.run_id, self.uri, marker=self.marker, spill_dir=spill_root(self._workdir))
        except OSError as exc:  # no process to spare: the run goes on; an orphan is still ended by the next run
            log.warning("radt-ext: cannot start the watchdog process (%s)", exc.strerror or exc)
        self.timings["watchdog_started"] = time.time()
        self.hook_missing = hook_missing() if self.progress_on() else None
        if self.hook_missing:
            log.warning("radt-ext: %s", self.hook_missing)
        try:
            if self.spec.launch and not _runnable(self.spec.command[0], self.spec.cwd):
                raise FileNotFoundError(2, "No such file or directory")  # as Popen says it without a launcher
            self.proc = subprocess.Popen([*self.spec.launch, *self.spec.command], env=self.child_env(),
                                         cwd=self.spec.cwd, start_new_session=True,
                                         stderr=subprocess.PIPE if self.keep_stderr_tail else None)
            if self.proc.stderr is not None:
                from radt_ext.run.stderr_tail import StderrTail

                self.stderr_tail = StderrTail(os.dup(self.proc.stderr.fileno()))
                self.proc.stderr.close()
        except OSError as exc:
            if self.client is not None:
                self.client.set_terminated(self.run_id, "FAILED")
            if self.watchdog is not None:
                self.watchdog.release()
            raise UsageError(f"cannot start {self.spec.command[0]!r}: {exc.strerror or exc}") from None
        self.timings["workload_started"] = time.time()
        from radt_ext.run.reaper import ProcessTree
        from radt_ext.run.spills import run_dir
        from radt_ext.run.workload_runs import WorkloadRuns
        from radt_ext.sampling.recorder import Recorder

        if self.watchdog is not None:
            self.watchdog.watch(self.proc.pid)
        if self._listeners is None:  # every available listener: their probes need not delay the workload
            self._listeners, self._skipped = select_listeners(self.spec.listeners, self.spec.interval, self.target)
        # listeners open while the workload starts up (imports take far longer than NVML init)
        self.target.pid = self.proc.pid
        self.tree = ProcessTree(self.proc.pid, (ENV_ACTIVE, self.marker)).start()  # catches setsid() escapes
        self.workload_runs = WorkloadRuns(self.client, self.uri, self.run_id, self.starts_path, self._run_tags(),
                                          progress_path=self.progress_path, full_rate=self.spec.full_rate_store,
                                          spill_dir=spill_root(self._workdir))
        self.recorder = Recorder(self.client, self.run_id, self.uri, self._listeners, t0=self.spec.t0,
                                 keep=self.keep_series, workload_runs=self.workload_runs,
                                 full_rate=self.spec.full_rate_store,
                                 spill_dir=run_dir(spill_root(self._workdir))).start()
        self.timings["listeners_started"] = time.time()
        if self.client is not None:
            self.workload_runs.start()
        if self.killed_by is not None:  # stopped while it was being spawned
            self.terminate(self.killed_by)
        return self

    def _run_tags(self) -> dict[str, str]:
        return {**self.machine_tags,
                "radt_ext.listeners": ",".join(f"{lst.name}:{lst.interval:g}" for lst in self._listeners)}

    def open_run_alongside(self) -> None:
        """With the workload running: reach the store (making a SQLite one that does not exist yet),
        create or join the run, and let the points held so far go out. A workload that started is always
        recorded: if the store cannot be reached now (it answered the checks a moment ago), the run goes
        to the spool with its points and its end, and `radt-ext sync` makes it in the store later
        (`spooled` says why). `run()` calls it on a thread of its own (`_open_in_background`): a stop
        signal meanwhile need not wait for MLflow's import or a new store's tables."""
        try:
            from radt_ext.store.client import quiet_heap

            with quiet_heap("import"):
                import mlflow.tracking  # noqa: F401 -- timed apart from the store's creation
            self.timings["mlflow_imported"] = time.time()
            if self.fresh_store:
                fresh_store.make(self.uri)
                self.timings["store_made"] = time.time()
            from radt_ext.store.client import connect

            client = connect(self.uri)
            self.timings["store_connected"] = time.time()
        except Exception as exc:
            with self._open_lock:
                if not self.abandoned:
                    self._opened = True
                    self._to_spool(exc)
            if self._announce is not None and not self.abandoned:
                self._announce(self)
            return
        with self._open_lock:  # a stop that gives up on the store waits for a run being made, or prevents it
            if self.abandoned:
                return
            self._opened = True  # decided: a stop now waits for the run rather than spool it
            self.client = client
            try:
                self._open_run()
            except Exception as exc:
                if self.run_id is not None and not self.joined:
                    self._stop_unrecorded()  # the run was made and already ended FAILED (_open_run)
                    raise
                self._to_spool(exc)
                return
            except BaseException:
                self._stop_unrecorded()
                raise
            self.timings["run_created"] = time.time()
            _import_for_threads()
            from radt_ext.report import reports_on

            if reports_on():
                # before the threads below start: no two threads import at once
                _import_for_the_end(warm=self.proc is not None and self.proc.poll() is None)
                self.timings["end_imported"] = time.time()
            write_run_id(self.run_id_path, self.run_id)
            if self.watchdog is not None:
                self.watchdog.run(self.run_id)
            self.workload_runs.tags = self._run_tags()
            self.workload_runs.bind(self.client, self.run_id).start()
            self.recorder.bind(self.client, self.run_id)
        if self._announce is not None:
            self._announce(self)

    def _open_in_background(self) -> None:
        def target():
            try:
                self.open_run_alongside()
            except BaseException as exc:  # raised again by _join_opener, in the main thread
                self._open_error = exc
        self._opener = threading.Thread(target=target, name="radt-open-run", daemon=True)
        self._opener.start()

    def _join_opener(self) -> None:
        """The run made (or spooled) by the opener thread; after a stop, waited for until the stop's
        budget runs short, then the run goes to the spool and the opener is left behind (the process
        exits without it: `abandoned`)."""
        if self._opener is None:
            return
        while self._opener.is_alive():
            if self.stopped_at is None:
                self._opener.join(0.1)
                continue
            left = self._store_time()
            if left > 0:
                self._opener.join(min(left, 0.1))
                continue
            with self._open_lock:
                if not self._opened:
                    self.abandoned = True
            if self.abandoned:
                fresh_store.discard(self.uri)  # the opener's half-made store file, if it was making one
                sig = signal.Signals(self.killed_by).name
                self._to_spool(TimeoutError(f"stopped by {sig} before the run was made in the store"))
                return
            self._opener.join()  # the run is made: only its binding is left
        if self._open_error is not None:
            raise self._open_error

    def _stop_left(self) -> float:
        """Seconds left of the stop's budget (STOP_BUDGET_S after the first stop signal); inf without a stop."""
        if self.stopped_at is None:
            return float("inf")
        return STOP_BUDGET_S - (time.monotonic() - self.stopped_at)

    def _stop_unrecorded(self) -> None:
        self.terminate(signal.SIGTERM)
        if self.proc is not None:
            self.proc.wait()
            self._reap_group()
        if self.recorder is not None:
            self.recorder.stop()
        if self.watchdog is not None:
            self.watchdog.release()

    def _to_spool(self, exc: BaseException) -> None:
        """The store cannot be reached: the run (a new one described in full, or the handed-over one)
        goes to the spool; the workload goes on unless it was stopped already."""
        from radt_ext.run.watchdog import owner_tags
        from radt_ext.sampling import machine
        from radt_ext.store.writer import first_line

        self.client = None
        reason = str(exc) if isinstance(exc, (UsageError, TimeoutError)) else first_line(exc)
        prefix = f"cannot use the tracking store {self.uri}: "
        self.spooled = reason[len(prefix):].rsplit("; ", 1)[0] if reason.startswith(prefix) else reason
        made = None
        if self.run_id is None:
            self.run_id = uuid.uuid4().hex  # the spool's name for it; sync makes the run and tags it with this
            tags = {**owner_tags(), **machine.describe(), **self._run_tags(),
                    "radt_ext.command": shlex.join(self.spec.command)[:5000], **self.spec.tags}
            for name, why in self._skipped.items():
                tags[f"radt_ext.listener_skipped.{name}"] = why[:4000]
            if self.spec.run_name:
                tags["mlflow.runName"] = self.spec.run_name
            made = {"experiment_id": self.experiment_id, "experiment_name": self.experiment_name,
                    "run_name": self.spec.run_name,
                    "start_time": int(self.timings.get("session_started", time.time()) * 1000),
                    "tags": tags, "params": {k: str(v) for k, v in self.spec.params.items()}}
        self.recorder.writer.bind_to_spool(self.run_id, made)
        write_run_id(self.run_id_path, self.run_id)  # the workload's runs name it; sync's run carries it as a tag
        if self.abandoned:
            return  # stopped: the last line says where the run is
        log.warning("radt-ext: the tracking store %s cannot be reached now (%s); the run and its samples go to "
                    "%s (`radt-ext sync` records them)", self.uri, self.spooled, self.spool_path)

    @property
    def spool_path(self):
        return self.recorder.writer.spool_path if self.recorder is not None else None

    def wait(self) -> int:
        self.returncode = wait_child(self.proc)
        self.timings["workload_ended"] = time.time()
        self._reap_group()
        self.timings["workload_reaped"] = time.time()
        return self.returncode

    def terminate(self, sig: int = signal.SIGTERM) -> None:
        """Signal the workload's whole process group; SIGKILL follows after a grace period."""
        self.killed_by = self.killed_by or sig  # before it starts too: start() then ends it at once
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
            self.timings["stop_signal"] = time.time()
        if self.proc is None or self.proc.poll() is not None:
            return
        self._signal_group(sig)
        timer = threading.Timer(KILL_GRACE_S, self._signal_group, args=(signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if getattr(self, "tree", None) is not None:
            self.tree.signal(sig)  # descendants that left the group

    def _reap_group(self) -> None:
        """Processes the workload left behind in its group do not outlive the session."""
        self._signal_group(signal.SIGKILL)
        if getattr(self, "tree", None) is not None:
            self.tree.stop()

    # -- after ------------------------------------------------------------------------
    def status(self) -> str:
        if self.final_status is not None:
            return self.final_status  # a signal during finish() does not change what was recorded
        if self.killed_by is not None:
            return "KILLED"
        return "FINISHED" if self.returncode == 0 else "FAILED"

    def finish(self, status: str | None = None) -> int:
        """Flush, summaries, status, then the timelines, report and view. After a stop signal the store
        work fits STOP_BUDGET_S: the summaries and status come first and what the store does not take in
        time is spooled; no report or view is made (they would not fit)."""
        status = self.final_status = status or self.status()
        if self.recorder is None:  # stopped before the workload started
            from mlflow.entities import RunTag

            self.client.log_batch(self.run_id, tags=[RunTag("radt_ext.exit_code", "None")])
            self.client.set_terminated(self.run_id, status)
        else:
            from radt_ext.store.writer import Point  # no MLflow import here: a stop may have left it half done

            if self.stopped_at is None:  # the listeners close while the run's figures are written
                self.recorder.stop(defer_close=True)
            else:  # the last batches get what is left of the stop's budget; the rest is spooled
                self.recorder.stop(timeout=max(0.5, self._store_time()))
            self.timings["listeners_closed"] = time.time()
            self._close_workload_runs(status)
            self.timings["workload_runs_closed"] = time.time()
            from radt_ext.workload_api.progress import read_marks

            self.marks = read_marks(self.progress_path, off=not self.progress_on(), missing=self.hook_missing)
            self.summary = {**self.recorder.summary(self.marks, self._logged_span), **self.extra_summary}
            self._log_timelines()
            self.timings["timelines_logged"] = time.time()
            now = int(time.time() * 1000)
            metrics = [Point(f"summary/{k}", float(v), now, 0) for k, v in self.summary.items()]
            tags = self.recorder.listener_tags()
            tags.update(self.workload_runs.monitor_tags())
            tags["radt_ext.exit_code"] = str(self.returncode)
            tags.update(progress_tags(self.marks))
            metrics += rate_timeline(self.marks, self.recorder.t0)
            failed_text = self._stderr_tail(status)
            if failed_text:
                tags["radt_ext.stderr_tail"] = failed_text
            # the writer spools the end of the run too when the store is away; `radt-ext sync` applies it
            stored = self.recorder.writer.end_run(
                metrics, tags, status, end_time=int(self.ended_at * 1000) if self.ended_at else None,
                timeout=None if self.stopped_at is None else max(0.5, self._stop_left()))
            self.timings["summaries_logged"] = time.time()
            if self.workload_runs_left is not None and not self.spooled:
                self._end_left_runs(status)
            if stored and self.stopped_at is None:
                self._log_report()
                self.timings["report_logged"] = time.time()
                self._refresh_view()
                self.timings["view_refreshed"] = time.time()
            self.recorder.drop_logged_timelines()
            self.recorder.wait_closed()
            self.timings["listeners_released"] = time.time()
        if self.watchdog is not None:
            self.watchdog.let_go()
            if not self.reap_later:
                self.watchdog.reap(timeout=10.0 if self.stopped_at is None else 0.5)
        if self.returncode is None:
            return 128 + self.killed_by if self.killed_by else 1
        return exit_code(self.returncode)

    def _log_timelines(self) -> None:
        """The run's full-rate timelines as its artifact, before the report that reads them; when the store
        is away, the reason goes with the run's spooled tags (the file stays where the tag says).

        After a stop signal it gets what is left of the stop's budget: writing the file (Parquet) takes
        seconds on a loaded host, and the run's summaries and status come first."""
        def call(fn):
            if self.recorder.writer.down:
                raise TimeoutError("the store was away at the run's end")
            return self._within_store_deadline(fn)

        from radt_ext.report import reports_on

        keep = self.stopped_at is None and reports_on()  # the report reads the file from here, not the store

        def log():
            self.recorder.log_timelines(self.client, self.run_id, call=call, keep=keep)
        no_time = ("stopped: no time left after the signal to write the full-rate timeline (the store holds "
                   "its shape)")
        try:
            if self.stopped_at is None:
                log()
            else:
                from radt_ext.store.writer import call_with_deadline

                left = self._store_time()
                if left <= 0.05:
                    self.recorder.timelines_error = no_time
                    return
                try:
                    call_with_deadline(log, left)
                except TimeoutError:
                    self.recorder.timelines_error = no_time
        except Exception as exc:  # log_timelines reports its own failures; this is the deadline's
            self.recorder.timelines_error = f"{type(exc).__name__}: {exc}".splitlines()[0]

    def _stderr_tail(self, status: str) -> str | None:
        """For a run that did not finish: the end of the workload's stderr as an artifact, and returned
        for the run's tag."""
        if self.stderr_tail is None:
            return None
        self.stderr_tail.close()
        if status == "FINISHED" or not self.stderr_tail.text().strip():
            return None
        if self.client is None:  # the run is in the spool: its tag holds the tail
            return self.stderr_tail.tag()
        try:
            self.client.log_text(self.run_id, self.stderr_tail.text(), "stderr_tail.txt")
        except Exception as exc:  # the store is away: the tag still goes with the spooled end of the run
            log.warning("radt-ext: cannot store the workload's stderr tail: %s", exc)
        return self.stderr_tail.tag()

    def _logged_span(self):
        """When the workload reported neither phases nor progress: the span of the metrics it logged
        itself, into this run or into the runs it started."""
        from radt_ext.figures.active import logged_span

        ids = [self.run_id, *(self.workload_runs.runs if self.workload_runs else ())]
        return self._within_store_deadline(lambda: logged_span(self.client, ids))

    def _log_report(self) -> None:
        """The run's report; skipped with one line when the server stops answering meanwhile."""
        from radt_ext.report import log_report

        try:
            timelines = self.recorder.logged_timelines()
        except Exception as exc:  # noqa: BLE001 - the report then reads the artifact back from the store
            log.debug("radt-ext: the kept timeline file: %s", exc)
            timelines = None
        if self.keep_read_timelines:
            self.read_timelines = timelines
        read = None if timelines is None else {self.run_id: timelines}
        try:  # log_report never raises: a failed report is a run tag
            # children (runs a joined workload nests under it) looked for in its experiment only: two queries
            # fewer; a group's workload (no MLFLOW_RUN_ID to nest under) that opened no run of its own has none
            childless = bool(self.spec.parent_run_id) and self.workload_runs is not None \
                and not self.workload_runs.runs
            self._within_store_deadline(lambda: log_report(self.client, self.run_id, timelines=read,
                                                           children_anywhere=False, childless=childless))
        except TimeoutError as exc:
            log.warning("radt-ext: no report for run %s (%s); the run itself is recorded", self.run_id, exc)

    def _refresh_view(self) -> None:
        """The experiment's comparison view, brought up to date; never fails the run."""
        from radt_ext import view

        try:
            self._within_store_deadline(lambda: view.refresh_quietly(self.client, self.experiment_id), 10.0)
        except TimeoutError as exc:
            log.warning("radt-ext: the comparison view was not updated (%s)", exc)

    def _close_workload_runs(self, status: str) -> None:
        """End the runs the workload opened and log their summaries; skipped with one line when the
        server stops answering meanwhile (radt-ext's own run still ends, spooled if need be)."""
        if self.spooled:
            return  # radt-ext's run is in the spool: the workload's runs could not be followed
        try:
            self._within_store_deadline(lambda: self.workload_runs.close(status), WORKLOAD_RUNS_TIMEOUT_S)
        except TimeoutError as exc:
            if self.stopped_at is not None:  # ended past the stop's budget, after radt-ext's own run
                self.workload_runs_left = str(exc)
                return
            log.warning("radt-ext: the runs the workload opened (%s) were not closed (%s); radt-ext's run %s "
                        "is recorded", ", ".join(self.workload_runs.runs) or "none found yet", exc, self.run_id)

    def _end_left_runs(self, status: str) -> None:
        """After a stop whose budget ran out before the workload's runs were closed (a workload that swallowed
        the signal and was killed takes the grace period): those it left RUNNING still end with the status,
        past the budget. It is a search and two writes a run; until it is done the watchdog still guards them."""
        from radt_ext.run.watchdog import end_workload_runs

        reason = (f"stopped by {signal.Signals(self.killed_by).name}; the workload left it RUNNING and radt-ext "
                  "ended it, without summaries (no time left)")
        try:
            ended = self.recorder.writer.call(
                lambda: end_workload_runs(self.client, self.run_id, status, reason), LEFT_RUNS_TIMEOUT_S)
        except Exception as exc:
            from radt_ext.store.writer import first_line

            log.warning("radt-ext: the runs the workload opened were not ended (%s; %s); those still RUNNING are to be "
                        "ended in MLflow", self.workload_runs_left, first_line(exc))
            return
        if ended:
            log.warning("radt-ext: ended %s as %s (the workload left it RUNNING; no summaries: %s)",
                        ", ".join(ended), status, self.workload_runs_left)

    def _within_store_deadline(self, fn, timeout: float = STORE_READ_TIMEOUT_S):
        """fn(), which reads the store through MLflow's client, within the writer's deadline (MetricWriter.call);
        after a stop signal within what is left of the stop's budget, on any store."""
        if self.stopped_at is None:
            return self.recorder.writer.call(fn, timeout)
        from radt_ext.store.writer import call_with_deadline

        timeout = self._store_time()
        if timeout <= 0.05:
            raise TimeoutError("no time left after the stop signal")
        return self.recorder.writer.call(lambda: call_with_deadline(fn, timeout), timeout)

    def _store_time(self) -> float:
        """After a stop: the seconds a step of the run's end may take, what is left of the stop's budget less
        the part kept for the summaries and status."""
        return max(0.0, self._stop_left() - STOP_STATUS_S)

    def run(self, announce=None, early_signals: list[int] | None = None) -> int:
        """check → start → (run created alongside) → wait → finish, with SIGINT/SIGTERM/SIGHUP
        stopping the child tree; prepare → start → … where the checks cannot tell without MLflow.

        The handlers are in place before the run is created and until its status is set, so no
        signal leaves it RUNNING; `announce(session)` is called once the run exists. `early_signals`: a
        list the caller's own handlers filled before this one was called (signals that stop it at once).
        """
        self.timings["session_started"] = time.time()
        with SignalRelay(self.terminate, signals=RUN_SIGNALS):
            for sig in list(early_signals or ()):  # caught before these handlers were in place
                self.terminate(sig)
            early = self.run_id is None and self.check()
            self.timings["checked"] = time.time()
            if self.killed_by is not None and self.client is None:
                raise Interrupted(self.killed_by, self.uri)
            if early:
                self._announce = announce
                self.start()
                self._open_in_background()  # announces the run once it exists
            else:
                if self.run_id is None:
                    self.prepare()
                if announce is not None:
                    announce(self)
                if self.killed_by is None:
                    self.start()
            if self.proc is not None:
                self.wait()
            self._join_opener()
            self.timings["run_opened"] = time.time()
            return self.finish()
