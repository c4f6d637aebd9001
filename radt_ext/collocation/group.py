"""Run one collocation group: a parent run (device-level listeners) and a child run per workload.

Every session is prepared first (runs created, listeners checked), then all start
together from one time origin (the barrier); for `exclusive` they run one after
another, the first of them started before the runs are made where `head_start()`
was called (its runs then start at its process's start). A workload that waits its turn (one after another, or a chain's start
offset, and where the guard follows the workload before it, that one's work planned
done by then) gets its run when its process starts, so that the run's start and end in
MLflow are its process's; the seconds it waited after the group started are its
`summary/wait_s`. The parent gets makespan, aggregate throughput, energy and, where
the caller supplies exclusive baselines, each child's slowdown.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from listeners import registry
from listeners.base import ListenerError, Target
from listeners.devices import identities as device_identities
from radt_ext.figures import active
from radt_ext.collocation import energy_split
from radt_ext.collocation.modes import CPU, Group, Workload, check, metric_name
from radt_ext.errors import UsageError
from radt_ext.sampling.selection import select_listeners
from radt_ext.run.session import WorkloadSession, WorkloadSpec, exit_code
from radt_ext.store.client import connect, experiment_id_for, tracking_uri
from radt_ext.run.signals import SignalRelay, join
from radt_ext.run.watchdog import owner_tags
from radt_ext import view

if TYPE_CHECKING:
    from radt_ext.collocation import guard as guard_mod
    from radt_ext.collocation.mps import MpsDaemon
    from radt_ext.sampling.recorder import Recorder

DEVICE_LISTENERS = ("nvml", "gpm", "smi", "dcgm", "rapl")
CHILD_LISTENERS = ("top", "gpu_procs")
MIG_CHILD_LISTENERS = ("top", "gpu_procs", "gpm")
ENV_TIMINGS = "RADT_EXT_TIMINGS"  # set: each group's steps (time.time()) are kept in TIMINGS for the caller to write
TIMINGS: list[dict] = []
WORK_SLACK_S = 0.5  # a chain's next job starts once the one before is this close to the work planned at its start


@dataclass
class ChildResult:
    name: str
    run_id: str
    device: str
    started: float
    ended: float | None = None
    returncode: int | None = None
    status: str = "SCHEDULED"
    summary: dict[str, float] = field(default_factory=dict)
    slowdown: float | None = None


@dataclass
class GroupResult:
    parent_run_id: str
    mode: str
    status: str
    exit_code: int
    t0: float
    makespan_s: float
    children: list[ChildResult]
    summary: dict[str, float]
    experiment_id: str | None = None

    @property
    def start_skew_s(self) -> float:
        starts = [c.started for c in self.children if c.started]
        return max(starts) - min(starts) if starts else 0.0


WORK_UNITS = ("samples", "steps")  # a workload's rate of work: samples/s, else steps/s where samples are not known


def work_rate(metrics: dict[str, float]) -> tuple[float, str] | None:
    """(rate, unit) of a run's active-phase work from its summary metrics; None without progress."""
    for unit in WORK_UNITS:
        rate = metrics.get(f"summary/throughput_{unit}_per_s")
        if rate:
            return float(rate), unit
    return None

class _Session(WorkloadSession):
    """A workload of a group: the end of its stderr goes onto its run when it fails; the timeline file its
    report read stays for the group's report; the view is the group's to refresh."""

    keep_stderr_tail = True
    keep_read_timelines = True

    def _refresh_view(self) -> None:
        """Nothing: the group refreshes its experiment's view once its own run has ended, right after."""


def available(names: tuple[str, ...], target: Target) -> str:
    return ",".join(n for n in names if registry.availability(n, target) is None)


def _visible(device: str) -> str:
    return "" if device == CPU else device


def check_devices(devices: list[str], where: str = "device") -> None:
    """A one-line UsageError, before anything runs, for a GPU this machine lacks, a machine without
    GPUs (NVML does not start) included. where: the line's start."""
    for device in dict.fromkeys(d for d in devices if d != CPU):
        try:
            registry.check_target(Target(pid=None, cuda_visible_devices=device), require_gpu=True)
        except ListenerError as exc:
            raise UsageError(f"{where} {device!r}: {exc}; use one of this machine's GPUs or cpu") from None


def _progress_window(session: _Session) -> tuple[float, float] | None:
    """The first and last progress mark the workload reported (None: fewer than two)."""
    times = session.marks.progress_times() if session.marks is not None else []
    return (times[0], times[-1]) if len(times) > 1 else None


def _progress_points(session: _Session) -> list[tuple[float, float]] | None:
    """(t, cumulative samples — else steps, else FLOPs — over its processes) at each progress record."""
    marks = session.marks
    times = marks.progress_times() if marks is not None else []
    for key in ("samples", "steps", "flops"):
        points = [(t, marks.total_at(key, t)) for t in dict.fromkeys(times)]
        if len(points) > 1 and points[-1][1] > points[0][1]:
            return points
    return None


class GroupRunner:
    def __init__(self, group: Group, echo=print):
        check(group)
        check_devices(group.devices)
        self.group = group
        self.echo = echo
        self.uri = tracking_uri(group.tracking_uri)
        self.client = None
        self.parent_run_id: str | None = None
        self.experiment_id: str | None = None
        self.order: tuple[str, str, str] = (group.mode, "", "")
        self.experiment_name: str | None = None
        self.sessions: list[_Session] = []
        self.results: list[ChildResult] = []
        self.daemons: dict[str, MpsDaemon] = {}
        self.stopping: int | None = None
        self.guard: guard_mod.Guard | None = None
        self.alone_rates: dict[str, tuple[float, str]] = {}  # workload -> its baseline's active-phase rate of work, unit (the guard's)
        self.alone_active: dict[str, float] = {}  # workload -> its baseline's active phase (s)
        self.on_parent = None  # called with the parent run's id once it exists (a sweep's host settings watchdog)
        # called once every workload has ended and the device listeners are closed: the devices are free for
        # the next group while this one writes its summaries and reports (a sweep's pool)
        self.on_free = None
        self._freed = False
        self._head: tuple[Recorder, list, dict, float] | None = None  # head_start(): recorder, listeners, skipped, t0
        self._head_waiter: threading.Thread | None = None
        self.timings: dict[str, float] = {}  # time.time() of each step (RADT_EXT_TIMINGS)
        self.measured_at: float | None = None  # measure_s: when the workloads were stopped, their window done

    # -- setting up ------------------------------------------------------------------
    def _mode_env(self, stack: contextlib.ExitStack) -> dict[str, tuple[dict[str, str], str]]:
        """{workload name: (extra env, the device its listeners watch)}."""
        g = self.group
        out = {}
        if g.mode == "mps":
            from radt_ext.collocation.mps import MpsDaemon

            uuids = device_identities(g.devices)
            for device in g.devices:
                daemon = MpsDaemon(device, uuid=uuids.get(device, (None,))[0])
                stack.callback(daemon.quit)  # registered before start: quit on every way out
                daemon.start()
                self.daemons[device] = daemon
            for w in g.workloads:  # the client's CUDA_VISIBLE_DEVICES names the daemon's GPU (see mps.py)
                env = self.daemons[w.device].client_env(w.mps_thread_percentage, w.mps_pinned_mem_limit)
                out[w.name] = (env, w.device)
        elif g.mode == "mig":
            from radt_ext.collocation import mig as mig_mod

            pinned = mig_mod.assign([(w.name, w.device, w.mig) for w in g.workloads], g.allow_mig_reconfigure,
                                    echo=self.echo)
            for w in g.workloads:
                out[w.name] = ({"CUDA_VISIBLE_DEVICES": pinned[w.name].uuid}, pinned[w.name].uuid)
        else:
            for w in g.workloads:
                out[w.name] = ({"CUDA_VISIBLE_DEVICES": _visible(w.device)}, _visible(w.device))
        return out

    def _parent_tags(self) -> dict[str, str]:
        from radt_ext.sampling import machine

        g = self.group
        tags = machine.describe()
        tags.update({
            "collocation.mode": g.mode,
            "collocation.gpu": ",".join(g.devices),
            "collocation.workloads": ",".join(w.name for w in g.workloads),
            "collocation.size": str(len(g.workloads)),
        })
        tags.update(g.tags)
        return tags

    def _log_tags(self, run_id: str, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:5000]) for k, v in tags.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, tags=items[i:i + 100])

    def _session(self, w: Workload, index: int, env: dict[str, str], watch: str) -> _Session:
        g = self.group
        names = g.child_listeners
        target = Target(pid=None, cuda_visible_devices=watch)
        if names is None:
            names = available(MIG_CHILD_LISTENERS if g.mode == "mig" else CHILD_LISTENERS, target)
        tags = {"collocation.mode": g.mode, "collocation.workload": w.name, "collocation.gpu": w.device,
                "collocation.index": str(index), view.ORDER_TAG: view.order_key(*self.order, index),
                **g.child_tags, **w.tags}
        if g.mode == "mig":
            tags["collocation.mig_device"] = watch
        # the experiment the parent resolved, by name (unique), so no environment variable can part them
        spec = WorkloadSpec(command=list(w.command), listeners=names or "top", interval=g.interval,
                            experiment_name=self.experiment_name, run_name=w.name, tags=tags,
                            params=dict(w.params), tracking_uri=self.uri, parent_run_id=self.parent_run_id,
                            env={**w.env, **env}, cwd=w.cwd, launch=list(w.launch))
        session = _Session(spec)
        session.reap_later = True  # its watchdog's exit waited for at the group's end, not before its close
        session.keep_series = energy_split.CHILD_SERIES
        session.target.cuda_visible_devices = watch
        session.target.time_sliced = g.mode == "naive"  # its gpu_procs keeps every tick of the driver
        return session

    # -- running ---------------------------------------------------------------------
    def stop(self, signum: int) -> None:
        """Stop every workload (SIGINT/SIGTERM, relayed from the handler to a thread of its own)."""
        self.stopping = self.stopping or signum
        if self.guard is not None:
            self.guard.stop()  # a paused workload runs again, so that it can end
        for s in list(self.sessions):
            if s.proc is not None:
                s.terminate(signum)

    def _waits(self, index: int) -> bool:
        """Whether the workload starts after the group did (one after another, or at a chain's offset)."""
        g = self.group
        return index > 0 and (g.mode == "exclusive" or g.workloads[index].start_offset_s is not None)

    def _open(self, s: _Session, experiment_id: str) -> None:
        """Its run created (listeners checked, the run described)."""
        s.prepare()
        self._in_experiment(s, experiment_id)

    @staticmethod
    def _in_experiment(s: _Session, experiment_id: str) -> None:
        if s.experiment_id != experiment_id:
            raise UsageError(f"workload {s.spec.run_name}: its run went to experiment {s.experiment_id}, "
                             f"not the group's {experiment_id}; unset MLFLOW_RUN_ID")

    def _start(self, s: _Session, result: ChildResult, t0: float) -> bool:
        if self.stopping:  # a signal came before this one started: it never runs
            return False
        if s.run_id is None:  # its turn came: its run starts now, with its process
            try:
                self._open(s, self.experiment_id)
            except Exception as exc:  # noqa: BLE001 - the others still run
                self.echo(f"radt-ext: workload {result.name}: no run for it: {exc}")
                result.status, result.returncode, result.ended = "FAILED", 1, time.time()
                return False
            result.run_id = s.run_id
        s.spec.t0 = t0
        result.started = time.time()
        try:
            s.start()
        except UsageError as exc:  # the command could not be spawned; the others still run
            self.echo(f"radt-ext: workload {result.name}: {exc}")
            result.status, result.returncode, result.ended = "FAILED", 127, time.time()
            return False
        if self.stopping:  # the signal came while it was being spawned
            s.terminate(self.stopping)
        return True

    def _wait_turn(self, before: ChildResult, offset: float) -> None:
        """Until `offset` s after `before` started, or it ended (or never started)."""
        while not self.stopping and before.status in ("SCHEDULED", "RUNNING") and before.ended is None:
            if before.started and time.time() >= before.started + offset:
                return
            time.sleep(0.05)

    def _wait_work(self, k: int) -> None:
        """Until workload k-1 has at most workload k's `start_work_left_s` (WORK_SLACK_S more) of its active
        phase to go at its rate alone, as the plan had it at k's start: one that runs slower than planned is
        not met early by k's start-up. Only where the guard follows k-1's progress (Guard.until_left)."""
        want = self.group.workloads[k].start_work_left_s
        before = self.results[k - 1]
        if want is None or self.guard is None or before.name not in self.guard.members:
            return
        self.guard.until_left(before.name, want + WORK_SLACK_S,
                              stopped=lambda: self.stopping or before.ended is not None
                              or before.status not in ("SCHEDULED", "RUNNING"))

    def _alone_rates(self) -> dict[str, tuple[float, str]]:
        """Each workload's exclusive active-phase rate of work and its unit (samples/s, else steps/s for a
        job whose samples are not known), where its baseline has one; its active phase alone beside."""
        out = {}
        for w in self.group.workloads:
            base = self.group.baselines.get(w.name)
            try:
                metrics = self.client.get_run(base[0]).data.metrics if base else {}
            except Exception:
                continue
            rate = work_rate(metrics) if "summary/active_s" in metrics else None
            if rate:
                out[w.name] = rate
                self.alone_active[w.name] = metrics["summary/active_s"]
        return out

    def _member(self, s: _Session, r: ChildResult) -> guard_mod.Member:
        """A workload as the guard sees it: its progress, its rate, active phase and wall time alone, its
        process tree and when it started."""
        from radt_ext.collocation import guard as guard_mod

        rate, unit = self.alone_rates.get(r.name, (None, "samples"))
        base = self.group.baselines.get(r.name)
        return guard_mod.Member(r.name, s.progress_path, rate, unit=unit,
                                pids=lambda: guard_mod.tree_pids(s.proc, getattr(s, "tree", None)),
                                running=lambda: s.proc is not None and s.proc.returncode is None,
                                alone_wall_s=base[1] if base and base[1] > 0 else None,
                                alone_active_s=self.alone_active.get(r.name),
                                started=lambda: r.started or None)

    def _wait_and_finish(self, s: _Session, result: ChildResult, between=None) -> None:
        """Wait for the workload, then (`between`, e.g. the devices handed back) end its run."""
        try:
            if self._head is not None and s is self.sessions[0]:
                join(self._head_waiter, 0.2)  # waited for since it started (head_start)
                if len(self.group.workloads) == 1 and result.ended:
                    self._head[0].until = result.ended  # the group's figures end with its job, not when reached
            else:
                result.returncode = s.wait()
                result.ended = time.time()
        finally:
            result.status = s.status()
            measured = self._measured(result)
            if measured:  # stopped by its group once measured, as asked: its run ends as one that did its part
                result.status, result.returncode = "FINISHED", 0
            try:
                if between is not None:
                    between()
            finally:
                try:
                    self._own_span(s, result)
                    s.finish(result.status)
                    if measured and result.run_id:
                        with contextlib.suppress(Exception):
                            self._log_tags(result.run_id, {MEASURED_TAG: f"{self.group.measure_s:g}"})
                finally:
                    result.summary = dict(s.summary)

    def _measured(self, result: ChildResult) -> bool:
        """Whether the workload ended because its measurement's window was done (measure_s)."""
        return (self.measured_at is not None and not self.stopping and result.ended is not None
                and result.ended >= self.measured_at and result.status != "FINISHED")

    def _stop_when_measured(self) -> None:
        """measure_s: once every workload's active phase (from its first progress: its start-up never counts)
        has run that long beside the others (one workload: alone), each is stopped as Ctrl-C would (SIGINT to
        its process tree). Nothing is stopped where one ended first, one never reports progress (its active
        phase cannot be told from its start-up: it runs to its end), or the group is stopping."""
        from radt_ext.collocation import guard as guard_mod
        from radt_ext.workload_api.progress import read_marks

        g = self.group
        since: dict[int, float] = {}
        while not self.stopping:
            if any(r.started and (r.ended is not None or r.status not in ("SCHEDULED", "RUNNING"))
                   for r in self.results):
                return  # one ended on its own: its window is what it is
            for k, s in enumerate(self.sessions):
                if k not in since and self.results[k].started and s.progress_path:
                    began = guard_mod.active_start(read_marks(s.progress_path))
                    if began is not None:
                        since[k] = began
            if len(since) == len(self.sessions) and time.time() - max(since.values()) >= g.measure_s:
                self.measured_at = time.time()
                how = "side by side" if len(self.results) > 1 else "alone"
                self.echo(f"radt-ext: {g.measure_s:g} s {how} measured: stopping "
                          f"{', '.join(r.name for r in self.results)}")
                for s in self.sessions:
                    guard_mod.signal_pids(guard_mod.tree_pids(s.proc, getattr(s, "tree", None)), signal.SIGINT)
                return
            time.sleep(guard_mod.TICK_S)

    @staticmethod
    def _own_span(s: _Session, result: ChildResult) -> None:
        """Its run ends when its process ended (not when its figures were written), and says how long it
        waited after the group started (`summary/wait_s`): both written with its end (spooled with it too)."""
        if not result.started:
            return
        s.extra_summary["wait_s"] = max(0.0, result.started - s.spec.t0) if s.spec.t0 else 0.0
        s.ended_at = result.ended

    # -- a head start: the first workload before MLflow ------------------------------
    def head_start(self) -> bool:
        """An exclusive group's first workload started, and the device listeners with it, before MLflow is
        imported (MLflow's import and the store take seconds before a sweep's first job); its runs are
        made once `run()` reaches the store. False, nothing started, where only MLflow can tell where the
        run goes or the command cannot be spawned (`run()` then goes the usual way)."""
        g = self.group
        if g.mode != "exclusive" or not g.experiment_name or self.sessions or g.measure_s is not None:
            return False  # a measurement's watch starts with its runs
        self.experiment_name = g.experiment_name
        mode_env = self._mode_env(contextlib.ExitStack())  # exclusive: each workload's devices, nothing to undo
        w = g.workloads[0]  # the others' sessions are made under the parent run, as usual
        first, result = self._session(w, 0, *mode_env[w.name]), ChildResult(w.name, None, w.device, 0.0)
        if not first.check():
            return False
        self.timings["workload_checked"] = time.time()
        t0 = first.spec.t0 = time.time()
        result.started = time.time()
        try:
            first.start()
        except UsageError:
            return False
        self.sessions, self.results = [first], [result]
        self.timings["workload_started"] = time.time()
        # its exit is seen when it comes, not when the sweep reaches this group (its run ends then)
        self._head_waiter = threading.Thread(target=self._wait_head, args=(first, result), daemon=True)
        self._head_waiter.start()
        listeners, skipped = self._device_listeners()
        from radt_ext.sampling.recorder import Recorder  # after the workload's start, as `radt-ext run` does

        recorder = Recorder(None, None, self.uri, listeners, t0=t0, keep=energy_split.PARENT_SERIES).start()
        self._head = (recorder, listeners, skipped, t0)
        self.timings["listeners_started"] = time.time()
        return True

    @staticmethod
    def _wait_head(s: _Session, result: ChildResult) -> None:
        with contextlib.suppress(Exception):
            result.returncode = s.wait()
        # its figures end with its process, though its listeners go on until its run is made and ended
        result.ended = s.recorder.until = time.time()

    def abandon(self, signum: int = signal.SIGTERM) -> None:
        """A head start whose group never ran (the sweep stopped or failed first): the workload stopped and
        its run spooled (`radt-ext sync` records it)."""
        if self._head is None or self.parent_run_id is not None:
            return
        recorder = self._head[0]
        self.stop(signum)
        s = self.sessions[0]
        self._head_waiter.join()
        with contextlib.suppress(Exception):
            recorder.stop(timeout=0.5)
        with contextlib.suppress(Exception):
            s._to_spool(TimeoutError("the sweep stopped before its store was reached"))
            s.finish()

    def _device_listeners(self) -> tuple[list, dict[str, str]]:
        """The group's device listeners (every available one unless the group names them) and why any
        asked for was skipped."""
        g = self.group
        watch = ",".join(_visible(d) for d in g.devices) if CPU not in g.devices else ""
        target = Target(pid=None, cuda_visible_devices=watch)
        spec = g.listeners if g.listeners is not None else available(DEVICE_LISTENERS, target)
        return select_listeners(spec, g.interval, target) if spec else ([], {})

    def _bind_head(self, experiment_id: str) -> None:
        """The head start's first workload gets its run under the parent, with the points held so far."""
        s = self.sessions[0]
        s.spec.parent_run_id = self.parent_run_id
        s.spec.tags[view.ORDER_TAG] = view.order_key(*self.order, 0)
        s.fresh_store = False  # the sweep made it by now
        s.open_run_alongside()
        if s.run_id is not None and not s.spooled:
            self._in_experiment(s, experiment_id)
        self.results[0].run_id = s.run_id

    def run(self) -> GroupResult:
        g = self.group
        self.timings["run"] = time.time()
        self.client = connect(self.uri)
        experiment_id = experiment_id_for(self.client, g.experiment_name)
        self.experiment_name = self.client.get_experiment(experiment_id).name
        with SignalRelay(self.stop), contextlib.ExitStack() as stack:
            mode_env = self._mode_env(stack)  # a head start's group is exclusive: nothing started here
            return self._run(experiment_id, mode_env)

    def _run(self, experiment_id: str, mode_env) -> GroupResult:
        from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

        g = self.group
        run_name = g.run_name or f"{g.mode}:{'+'.join(w.name for w in g.workloads)}"
        started = int(self._head[3] * 1000) if self._head is not None else None  # a head start: when it began
        parent = self.client.create_run(experiment_id, start_time=started,
                                        tags={MLFLOW_RUN_NAME: run_name, **owner_tags()},
                                        run_name=run_name)  # owner tags: the next run ends it if we are killed
        self.parent_run_id = parent.info.run_id
        self.experiment_id = experiment_id
        self.order = (g.mode, run_name, self.parent_run_id)  # the comparison view: children right after it
        if self.on_parent is not None:
            self.on_parent(self.parent_run_id)
        self.echo(f"radt-ext: group {g.mode} run {self.parent_run_id} ({len(g.workloads)} workloads)")
        self.timings["parent_created"] = time.time()
        head = self._head is not None
        try:
            listeners, skipped = self._head[1:3] if head else self._device_listeners()
            tags = self._parent_tags()
            tags[view.ORDER_TAG] = view.order_key(*self.order)
            tags["radt_ext.listeners"] = ",".join(f"{lst.name}:{lst.interval:g}" for lst in listeners)
            for name, why in skipped.items():
                tags[f"radt_ext.listener_skipped.{name}"] = why[:4000]
            self._log_tags(self.parent_run_id, tags)
            if head:
                self._bind_head(experiment_id)
            for i, w in enumerate(g.workloads[len(self.sessions):], start=len(self.sessions)):
                env, dev = mode_env[w.name]
                session = self._session(w, i, env, dev)
                if not self._waits(i):  # the others' runs are made when their turn comes
                    self._open(session, experiment_id)
                self.sessions.append(session)
                self.results.append(ChildResult(w.name, session.run_id, w.device, 0.0))
            if g.baselines and g.mode != "exclusive":
                self.alone_rates = self._alone_rates()
        except BaseException:
            if head:  # its workload is running: stopped, its listeners closed
                self.stop(signal.SIGTERM)
                self._head_waiter.join()
                with contextlib.suppress(Exception):
                    self._head[0].stop(timeout=0.5)
            self._fail_unstarted("FAILED")
            with contextlib.suppress(Exception):
                self.client.set_terminated(self.parent_run_id, "FAILED")
            raise
        if head:
            recorder, _, _, t0 = self._head
            recorder.bind(self.client, self.parent_run_id)
        else:
            from radt_ext.sampling.recorder import Recorder

            t0 = time.time()
            recorder = Recorder(self.client, self.parent_run_id, self.uri, listeners, t0=t0,
                                keep=energy_split.PARENT_SERIES).start()
        self.timings["bound"] = time.time()
        try:
            if g.measure_s is not None and not self.stopping:  # stops the workloads once measured
                threading.Thread(target=self._stop_when_measured, name="radt-measure", daemon=True).start()
            if g.mode == "exclusive":
                last = len(self.sessions) - 1
                for k, (s, r) in enumerate(zip(self.sessions, self.results)):
                    started = head and k == 0  # its workload runs already (or was stopped: waited for)
                    if self.stopping and not started:
                        break
                    if started or self._start(s, r, t0):  # the last one's run ends after the devices are given back
                        self._wait_and_finish(s, r, (lambda: self._free(recorder)) if k == last else None)
            else:
                if g.guard_slowdown is not None and not self.stopping:
                    from radt_ext.collocation import guard as guard_mod

                    self.guard = guard_mod.Guard([self._member(s, r) for s, r in zip(self.sessions, self.results)],
                                                 g.guard_slowdown, echo=self.echo,
                                                 lock_paths=_store_files(self.uri)).start()
                threads = []
                for k, (s, r) in enumerate(zip(self.sessions, self.results)):
                    offset = g.workloads[k].start_offset_s
                    if offset is not None and k > 0:
                        self._wait_turn(self.results[k - 1], offset)
                        self._wait_work(k)
                        if k > 1:  # a chain: never three at once, whatever ran late before it
                            self._wait_turn(self.results[k - 2], float("inf"))
                    if self._start(s, r, t0):
                        threads.append(threading.Thread(target=self._wait_and_finish, args=(s, r), daemon=True))
                        threads[-1].start()
                for t in threads:
                    join(t, 0.2)
        finally:
            if self.guard is not None:
                self.guard.stop()  # nothing stays paused
            self._fail_unstarted("KILLED" if self.stopping else "FAILED")
            self._free(recorder)
        try:
            return self._close(recorder, t0)
        finally:
            self.timings["ended"] = time.time()
            recorder.wait_closed()
            for s in self.sessions:  # let go at their runs' ends: by now their watchdogs have long exited
                if s.watchdog is not None:
                    s.watchdog.reap(timeout=0.5 if self.stopping else 10.0)
            self.timings["closed"] = time.time()
            if os.environ.get(ENV_TIMINGS):
                TIMINGS.append({**self.timings, "group": run_name, "workloads": [s.timings for s in self.sessions]})

    def _free(self, recorder: Recorder) -> None:
        """The device listeners closed, any MPS daemon gone, then the devices handed back (`on_free`); once."""
        if self._freed:
            return
        self._freed = True
        try:
            recorder.stop(defer_close=True)  # the listeners close (nvidia-smi's exit, NVML's shutdown) beside what follows
            for daemon in self.daemons.values():
                daemon.quit()  # before the parent's last tags, so they carry its answer
        finally:
            self.timings["freed"] = time.time()
            if self.on_free is not None:
                self.on_free()

    def _split_energy(self, recorder: Recorder, t0: float, summary: dict[str, float],
                      overlap: tuple[float, float] | None = None) -> str | None:
        """Each child's share of the GPU energy onto its run, the group's side into `summary`;
        returns why it failed (never raises: the group's own results come first)."""
        from mlflow.entities import RunTag

        from radt_ext.store.writer import batches

        g = self.group
        try:
            kids = [energy_split.Child(r.name, w.device, r.started, r.ended,
                                       s.recorder.series if s.recorder is not None else {}, w.mig,
                                       window=_progress_window(s), progress=_progress_points(s),
                                       kind=" ".join(w.command))
                    for w, s, r in zip(g.workloads, self.sessions, self.results)]
            parts = energy_split.split(g.devices, recorder.series, kids)
            samples = {r.name: r.summary.get("e2e_samples", 0.0) for r in self.results}
            summary.update(energy_split.parent_summary(parts, samples))
            for r in self.results:
                metrics = self._attributed_timeline(r.run_id, energy_split.child_metrics(r.name, parts,
                                                                                          samples[r.name], t0))
                if overlap is not None:  # the same over the window in which all the group's workloads are active
                    metrics += energy_split.overlap_metrics(r.name, parts, r.summary.get("overlap_samples", 0.0),
                                                            overlap)
                # the window the split used, so it can be recomputed from the store
                span = {"collocation.started_s": f"{r.started:.3f}", "collocation.ended_s": f"{r.ended or 0:.3f}"}
                window = next((k.window for k in kids if k.name == r.name), None)
                if window is not None:
                    span["collocation.progress_window"] = f"{window[0]:.3f},{window[1]:.3f}"
                for some, tags in batches(metrics, [RunTag(k, v) for k, v in span.items()]):
                    self.client.log_batch(r.run_id, metrics=some, tags=tags)
                r.summary.update({m.key[len("summary/"):]: m.value for m in metrics if m.key.startswith("summary/")})
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def _attributed_timeline(self, run_id: str, metrics: list) -> list:
        """A child's attributed power timeline: every point into its timeline artifact
        (timelines/attributed.parquet), its shape into the store (every point with the full rate)."""
        from mlflow.entities import Metric

        from radt_ext.store import timelines
        from radt_ext.store.run_points import full_rate_default
        from radt_ext.store.shaper import shape

        timeline = [m for m in metrics if m.key.startswith("system/")]
        if not timeline:
            return metrics
        rest = [m for m in metrics if not m.key.startswith("system/")]
        points = sorted(((m.key, m.value, m.timestamp, m.step) for m in timeline), key=lambda p: (p[0], p[3]))
        with contextlib.suppress(Exception):  # the store's points below still carry the timeline's shape
            timelines.log_points(self.client, run_id, ((k, t, s, v) for k, v, t, s in points),
                                 timelines.ATTRIBUTED_FILE)
            self._add_read(run_id, points)
        if not full_rate_default():
            points = shape(points)
        return rest + [Metric(k, v, t, s) for k, v, t, s in points]

    def _overlap_figures(self, recorder: Recorder, overlap: tuple[float, float], windows, summary: dict,
                         now: int) -> None:
        """The window in which every workload of the group is active: its span and the GPU's figures over
        it on the parent, each workload's throughput over it on its run."""
        from mlflow.entities import Metric, RunTag

        a, b = overlap
        seconds = b - a
        summary["overlap_s"] = seconds
        summary["overlap_start_s"] = a - (recorder.started or a)
        for key, value in recorder.summaries.figures(a, b).items():
            if key.startswith("gpu_total_") or key.startswith("gpu_mean_avg_"):
                summary[f"overlap_{key}"] = value
        for r, s, _ in windows:
            mine = {"overlap_s": seconds}
            paused = self.guard.paused_s(r.name, a, b) if self.guard is not None else 0.0
            counted = active.counts(s.marks, a, b)
            samples = counted.get("samples", 0.0)
            if paused > 0:
                mine["overlap_paused_s"] = paused
            if samples > 0:
                mine["overlap_samples"] = samples
                # the seconds it was paused by the guard it waited, as a queued job does: left out
                mine["overlap_throughput_samples_per_s"] = samples / max(seconds - paused, 1e-9)
                if paused > 0:
                    mine["overlap_with_pauses_throughput_samples_per_s"] = samples / seconds
            elif counted.get("steps", 0.0) > 0:  # samples not known: its steps
                mine["overlap_throughput_steps_per_s"] = counted["steps"] / max(seconds - paused, 1e-9)
            r.summary.update(mine)
            if "overlap_throughput_samples_per_s" in mine:
                summary[f"{metric_name(r.name)}_overlap_throughput_samples_per_s"] = \
                    mine["overlap_throughput_samples_per_s"]
            tags = {"collocation.overlap_start": f"{a:.3f}", "collocation.overlap_end": f"{b:.3f}"}
            with contextlib.suppress(Exception):
                self.client.log_batch(r.run_id, metrics=[Metric(f"summary/{k}", float(v), now, 0)
                                                         for k, v in mine.items()],
                                      tags=[RunTag(k, v) for k, v in tags.items()])

    def _slowdown(self, r: ChildResult, base: tuple) -> tuple[float | None, float | None, str]:
        """(lived, active, basis) against the workload's exclusive run. Lived, the figure every decision
        and table uses: its wall time here (start-up, every paused second, its active phase) over its wall
        time alone, or where both runs counted work its work rate alone over its rate here (a job that
        stops on time keeps its wall time and pays in work), the larger. Active (the figure beside it):
        active-phase throughput alone over throughput in the group's overlap; without progress, the
        active spans' ratio, its paused seconds left out."""
        try:
            alone = self.client.get_run(base[0]).data.metrics
        except Exception:
            alone = {}
        lived, basis = None, ""
        wall = r.summary.get("e2e_duration_s") or ((r.ended - r.started) if r.ended and r.started else None)
        if wall and base[1] > 0:  # base[1]: its wall time alone (the exclusive run's e2e_duration_s)
            lived, basis = wall / base[1], "wall"
            for unit in WORK_UNITS:
                thr, here = alone.get(f"summary/e2e_throughput_{unit}_per_s"), r.summary.get(f"e2e_throughput_{unit}_per_s")
                if thr and here:
                    if thr / here > lived:
                        lived, basis = thr / here, f"{unit}/s over the whole run"
                    break
        active_ratio = None
        for unit in WORK_UNITS:
            thr = alone.get(f"summary/throughput_{unit}_per_s") if "summary/active_s" in alone else None
            co = r.summary.get(f"overlap_throughput_{unit}_per_s")
            if thr and co:
                active_ratio = thr / co
                break
        if active_ratio is None and alone.get("summary/active_s") and r.summary.get("active_s"):
            running = r.summary["active_s"] - r.summary.get("guard_active_paused_s", 0.0)
            active_ratio = running / alone["summary/active_s"]
        return lived, active_ratio, basis

    def _guard_figures(self, windows, summary: dict) -> None:
        """What the guard saw and did, onto each workload's run (its paused seconds, in its active phase
        too, and the highest live slowdown it read) and the group's."""
        from mlflow.entities import Metric, RunTag

        active_of = {r.name: w for r, _, w in windows}
        now = int(time.time() * 1000)
        for r in self.results:
            mine = self.guard.summary(r.name)
            w = active_of.get(r.name)
            if w is not None:
                mine["guard_active_paused_s"] = self.guard.paused_s(r.name, w.start, w.end)
            r.summary.update(mine)
            with contextlib.suppress(Exception):
                self.client.log_batch(r.run_id, metrics=[Metric(f"summary/{k}", float(v), now, 0)
                                                         for k, v in mine.items()],
                                      tags=[RunTag("collocation.guard", self.guard.member_text(r.name)[:5000])])
        summary["guard_paused_s"] = sum(self.guard.paused_s(r.name) for r in self.results)
        summary["guard_actions"] = float(sum(e.action in ("pause", "resume") for e in self.guard.events))

    def _fail_unstarted(self, status: str) -> None:
        """The workloads that never started end `status`, each with a run (made now where its turn never came)."""
        for s, r in zip(self.sessions, self.results):
            if s.proc is None and r.status == "SCHEDULED":
                r.status = status
                with contextlib.suppress(Exception):
                    if s.run_id is None:
                        s.prepare()
                        r.run_id = s.run_id
                    self.client.set_terminated(s.run_id, status)

    # -- after -----------------------------------------------------------------------
    def _windows(self) -> list[tuple[ChildResult, _Session, active.Window]]:
        return [(r, s, s.recorder.window) for s, r in zip(self.sessions, self.results)
                if s.recorder is not None and s.recorder.window is not None]

    def _close(self, recorder: Recorder, t0: float) -> GroupResult:
        from mlflow.entities import Metric, RunTag

        from radt_ext.collocation import pairs
        from radt_ext.figures.summaries import E2E, counts_per_s
        from radt_ext.report import log_report, reports_on

        g = self.group
        ends = [r.ended for r in self.results if r.ended]
        makespan = (max(ends) - t0) if ends else 0.0
        windows = self._windows()
        # the group's active phase: from the first workload's active start to the last one's end
        group_window = None
        if windows:
            source = windows[0][2].source if len({w.source for _, _, w in windows}) == 1 else "mixed"
            group_window = active.Window(min(w.start for _, _, w in windows), max(w.end for _, _, w in windows),
                                         source)
        active_samples = sum(r.summary.get("samples", 0.0) for r in self.results)
        all_samples = sum(r.summary.get("e2e_samples", 0.0) for r in self.results)
        recorder.stopped = recorder.stopped or time.time()
        summary = recorder.summary(window=group_window)
        counts_per_s(summary, {"samples": active_samples} if active_samples else None, summary["active_s"])
        whole = {k[len(E2E):]: v for k, v in summary.items() if k.startswith(E2E)}
        counts_per_s(whole, {"samples": all_samples} if all_samples else None, makespan)
        summary.update({E2E + k: v for k, v in whole.items()})
        summary["makespan_s"] = makespan
        starts = [r.started for r in self.results if r.started]
        if len(starts) > 1 and g.mode != "exclusive":
            summary["start_skew_s"] = max(starts) - min(starts)
        overlap = active.overlap([w for _, _, w in windows]) if g.mode != "exclusive" and len(windows) > 1 else None
        now = int(time.time() * 1000)
        if overlap is not None:
            self._overlap_figures(recorder, overlap, windows, summary, now)
        if self.guard is not None:
            self._guard_figures(windows, summary)
        paused = {r.name: self.guard.paused_spans(r.name) for r in self.results} if self.guard else {}
        shared = g.mode in ("naive", "mps") and len(windows) > 1
        measured = pairs.measure([(r.name, s.marks, w) for r, s, w in windows], self.alone_rates, paused) \
            if shared else []
        boots = pairs.measure_startups([(r.name, s.marks, w, r.started) for r, s, w in windows], self.alone_rates,
                                       paused) if shared else []
        slowdowns = []
        for r in self.results:
            base = g.baselines.get(r.name)
            if base and r.status == "FINISHED":
                r.slowdown, active_ratio, basis = self._slowdown(r, base)
                metrics = []
                if active_ratio is not None:
                    r.summary["active_slowdown_ratio"] = active_ratio
                    metrics.append(Metric("summary/active_slowdown_ratio", active_ratio, now, 0))
                if r.slowdown is not None:
                    slowdowns.append(r.slowdown)
                    summary[f"{metric_name(r.name)}_slowdown_ratio"] = r.slowdown
                    r.summary["slowdown_ratio"] = r.slowdown
                    metrics.append(Metric("summary/slowdown_ratio", r.slowdown, now, 0))
                if metrics:
                    with contextlib.suppress(Exception):
                        self.client.log_batch(r.run_id, metrics=metrics,
                                              tags=[RunTag("baseline_run_id", base[0]),
                                                    RunTag("collocation.slowdown_basis", basis or "-")])
            if "throughput_samples_per_s" in r.summary:
                summary[f"{metric_name(r.name)}_throughput_samples_per_s"] = r.summary["throughput_samples_per_s"]
        if slowdowns:
            summary["avg_slowdown_ratio"] = sum(slowdowns) / len(slowdowns)
            summary["max_slowdown_ratio"] = max(slowdowns)
        split_error = self._split_energy(recorder, t0, summary, overlap)
        self.timings["energy_split"] = time.time()
        statuses = [r.status for r in self.results]
        if self.stopping or "KILLED" in statuses:
            status = "KILLED"
        elif all(s == "FINISHED" for s in statuses):
            status = "FINISHED"
        else:
            status = "FAILED"
        code = 0
        for r in self.results:
            if r.returncode:
                code = exit_code(r.returncode)
                break
        if self.stopping:  # stopped by a signal: report it the way a shell does, whatever the children said
            code = 128 + int(self.stopping)
        if status != "FINISHED" and not code:
            code = 1
        recorder.log_timelines(self.client, self.parent_run_id, call=lambda fn: recorder.writer.call(fn, 60.0),
                               keep=reports_on())
        self.timings["timelines_logged"] = time.time()
        tags = recorder.listener_tags()
        if self.guard is not None:
            tags["collocation.guard"] = f"max slowdown {g.guard_slowdown:g}: {self.guard.log_text()}"[:5000]
        if self.measured_at is not None:
            tags[MEASURED_TAG] = f"{g.measure_s:g}"
        if split_error:
            tags["radt_ext.attribution_error"] = split_error[:4000]
        tags["collocation.status"] = ",".join(f"{r.name}={r.status}" for r in self.results)
        if measured:
            tags[pairs.TAG] = pairs.text(measured)[:5000]
        if boots:
            tags[pairs.STARTUP_TAG] = pairs.text(boots)[:5000]
        for device, daemon in self.daemons.items():
            log = daemon.control_log()
            if log:
                with contextlib.suppress(Exception):
                    self.client.log_text(self.parent_run_id, log, f"mps/gpu{device}_control.log")
            tags[f"collocation.mps.gpu{device}.quit"] = (daemon.quit_output or "sent")[:500]
            tags[f"collocation.mps.gpu{device}.visible"] = daemon.visible
        # like a workload's end: spooled with the samples when the store is away (`radt-ext sync` applies it)
        metrics = [Metric(f"summary/{k}", float(v), now, 0) for k, v in summary.items()]
        if recorder.writer.end_run(metrics, tags, status):
            self.timings["summaries_logged"] = time.time()
            # the children's timelines stacked, from the files their runs and this one logged; never raises
            log_report(self.client, self.parent_run_id, children_anywhere=False,
                       timelines=self._read_timelines(recorder))
            self.timings["report_logged"] = time.time()
            with contextlib.suppress(TimeoutError):  # a server that stopped answering: no view update
                recorder.writer.call(lambda: view.refresh_quietly(self.client, self.experiment_id), 10.0)
            self.timings["view_refreshed"] = time.time()
        recorder.drop_logged_timelines()  # no report (the store away): the file kept for it goes
        for s in self.sessions:
            s.read_timelines = None
        return GroupResult(self.parent_run_id, g.mode, status, code, t0, makespan, self.results, summary,
                           self.experiment_id)

    def _add_read(self, run_id: str, points: list) -> None:
        """A child's attributed timeline beside the timeline file its report read, merged as the store reads
        its two files back."""
        from radt_ext.store import timelines

        s = next((s for s in self.sessions if s.run_id == run_id and s.read_timelines is not None), None)
        if s is None:
            return
        attributed: dict[str, list] = {}
        for key, value, t, step in points:
            attributed.setdefault(key, []).append((t, step, value))
        s.read_timelines = timelines.merged([s.read_timelines, attributed])

    def _read_timelines(self, recorder: Recorder) -> dict[str, dict]:
        """{run id: its timeline file as logged} for the parent and each child whose run's report read it (the
        others are read back from the store)."""
        found = {s.run_id: s.read_timelines for s in self.sessions if s.read_timelines is not None and s.run_id}
        with contextlib.suppress(Exception):  # unreadable: read back from the store
            kept = recorder.logged_timelines()
            if kept is not None:
                found[self.parent_run_id] = kept
        return found


MEASURED_TAG = "collocation.measured_s"  # a measurement group's window: its workloads stopped after it


def _store_files(uri: str) -> list[str]:
    """The files of a local SQLite store (a workload stopped holding a lock on one stalls every writer);
    none for a store behind a server."""
    if not uri.startswith("sqlite:///"):
        return []
    path = uri[len("sqlite:///"):].split("?")[0]
    return [path, f"{path}-journal", f"{path}-wal", f"{path}-shm"]


def run_group(group: Group, echo=print) -> GroupResult:
    """Run one group to the end (SIGINT/SIGTERM stop every workload; MPS daemons always quit)."""
    return GroupRunner(group, echo=echo).run()
