"""A guard beside a running collocation group: it keeps each workload within a bound on its slowdown as
the workload lives it (its wall time over its wall time alone).

Every TICK_S it reads each workload's live progress (the records `radt_ext.log_progress`, or radt-ext's
start-up hook, appends to the workload's progress file) and compares its rate with its exclusive run's
active-phase rate: live slowdown = alone rate / rate over its latest WINDOW_S of progress, read only once
its active phase has run SETTLE_S (its first steps are no steady rate), never for a workload whose active
phase alone is shorter than SETTLE_S + WINDOW_S (its rate says nothing; its wall time is what counts).

A workload beyond the bound while another runs beside it (in its active phase, or still starting up:
imports, a CUDA context and autotuning slow a neighbour too) is *over*. Before acting the guard counts
what each way out costs as the jobs live it: pausing the companions (each one's wall time grows by the
over job's remaining active phase), pausing the over job instead (its wall time grows by the companions'
remaining active phases), or letting both run on at their live rates. Each is projected to each job's
end: (seconds since it started + seconds added + its remaining work at its alone rate) / its wall time
alone. A job that has not begun its active phase, or has no rate alone, pays a pause in wall time only:
(its wall time alone, or its time so far where longer, + the pause) / its wall time alone, never a
division by a rate it does not have. The guard takes the way whose worst projected slowdown is lowest; a
pause that would push the paused job past the bound is not taken where another way keeps everyone within
it. A paused workload (SIGSTOP to its whole process tree) resumes (SIGCONT) when the protected one's
active phase ends (its process exits, its phases close, or it reports no progress for IDLE_S), or when a
whole WINDOW_S with the others paused still finds it beyond the bound (what slows it is not in this
group). A process is never left stopped holding a lock on the files given (a SQLite store's; any file
where none are given): the guard looks in /proc/locks after stopping it and, where it holds one, lets it
run on and tries again shortly.

A workload that reports no progress cannot be watched: it is never protected, only paused for others
(where what that costs it can be projected). Every decision is an Event (time, action, workload, live
slowdown, why), for the group's tags.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import psutil

from radt_ext.workload_api.progress import read_marks

TICK_S = 0.25
WINDOW_S = 2.0  # the live rate is taken over this much of the workload's latest progress
SETTLE_S = 1.0  # ... once its active phase has run this long (its first steps are no steady rate)
IDLE_S = 2.0  # a protected workload without new progress this long has left its active phase
LOCK_TRIES = 20  # a workload stopped while holding a file lock runs on; tried again this often, ...
LOCK_RETRY_S = 0.05  # ... this far apart


@dataclass
class Member:
    name: str
    progress_path: str | None
    alone_rate: float | None  # work/s over its exclusive run's active phase; None: not watched
    pids: Callable[[], list[int]]  # its process tree now (empty once it ended)
    running: Callable[[], bool]
    unit: str = "samples"  # what alone_rate counts: samples, or steps where the job's samples are not known
    alone_wall_s: float | None = None  # its wall time alone (None: what a pause costs it is not known)
    alone_active_s: float | None = None  # its active phase alone
    started: Callable[[], float | None] = lambda: None  # when its process started (None: not yet)


@dataclass
class Event:
    t: float
    action: str  # over (beyond the bound), pause, resume, deferred (could not pause: holds a lock)
    name: str
    live_slowdown: float | None = None
    why: str = ""
    lost_s: float | None = None  # over: the seconds the job lost beside the others (see Guard.lost_s)

    def text(self, t0: float) -> str:
        live = f" live {self.live_slowdown:.2f}" if self.live_slowdown is not None else ""
        lost = f"; {self.lost_s:.1f} s lost" if self.lost_s is not None else ""
        return f"{self.t - t0:.1f}s {self.action} {self.name}{live}: {self.why}{lost}"


@dataclass
class _State:
    seen_until: float = 0.0  # the last progress record evaluated
    last_progress_at: float | None = None  # wall time the newest progress record arrived
    active_since: float | None = None  # its first progress record or phase mark
    live: float | None = None
    live_from: float = 0.0  # the start of the window `live` was read over
    live_max: float | None = None
    done: float = 0.0  # its work so far
    paused_since: float | None = None
    paused: list[tuple[float, float]] = field(default_factory=list)
    resumed_at: float = 0.0
    kept_at: float = float("-inf")  # when the guard last chose to let it run on beyond the bound


def _file_ids(paths) -> set[tuple[int, int, int]]:
    out = set()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        out.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    return out


def locked_pids(paths: list[str] | None = None) -> set[int]:
    """Processes holding a file lock (Linux /proc/locks): on any file, or only on `paths`; empty where
    that cannot be read."""
    try:
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return set()
    wanted = _file_ids(paths) if paths is not None else None
    out = set()
    for line in lines:
        parts = line.split()
        if "->" in parts or len(parts) < 6:  # a waiter, not a holder
            continue
        pid, where = parts[4], parts[5]
        if not pid.isdigit():
            continue
        if wanted is not None:
            try:
                major, minor, inode = where.split(":")
                if (int(major, 16), int(minor, 16), int(inode)) not in wanted:
                    continue
            except ValueError:
                continue
        out.add(int(pid))
    return out


def signal_pids(pids: list[int], sig: int) -> list[int]:
    hit = []
    for pid in pids:
        try:
            psutil.Process(pid).send_signal(sig)
            hit.append(pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return hit


def tree_pids(proc, tree=None) -> list[int]:
    """A workload's processes now: its first process, every descendant, and those that left its process
    group (radt_ext.run.reaper.ProcessTree); empty once it ended."""
    if proc is None or proc.returncode is not None:
        return []
    pids = [proc.pid]
    try:
        pids += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    except psutil.Error:
        pass
    if tree is not None:
        pids += [p.pid for p in tree.survivors() if p.pid not in pids]
    return pids


def active_start(marks) -> float | None:
    """When a workload's active phase began: its first progress record or phase start (None: neither yet)."""
    if marks is None:
        return None
    starts = marks.progress_times()[:1] + [t for t, _, e in marks.phases if e == "start"][:1]
    return min(starts) if starts else None


class Guard:
    def __init__(self, members: list[Member], bound: float, echo: Callable[[str], None] | None = None,
                 window_s: float = WINDOW_S, tick_s: float = TICK_S, idle_s: float = IDLE_S,
                 lock_paths: list[str] | None = None):
        self.members = {m.name: m for m in members}
        self.bound = bound
        self.echo = echo or (lambda line: None)
        self.window_s, self.tick_s, self.idle_s = window_s, tick_s, idle_s
        self.lock_paths = lock_paths  # a stopped process may hold no lock on these (None: on any file)
        self.state = {m.name: _State() for m in members}
        self.events: list[Event] = []
        self.protecting: str | None = None
        self.protected_at = 0.0
        self.unhelped: set[str] = set()  # pausing the others did not help them: never protected again
        self.t0 = time.time()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="radt-guard", daemon=True)

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> "Guard":
        self.t0 = time.time()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; every paused workload runs again."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)
        with self._lock:
            for name in list(self.state):
                if self.state[name].paused_since is not None:
                    self._resume(name, "the group ends")

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                with self._lock:
                    self.tick(time.time())
            except Exception as exc:  # the guard must never take the group down: it lets all run and stops
                self.events.append(Event(time.time(), "error", "-", None, f"{type(exc).__name__}: {exc}"))
                with self._lock:
                    for name in list(self.state):
                        if self.state[name].paused_since is not None:
                            self._resume(name, "the guard stopped watching")
                return

    # -- one look -----------------------------------------------------------------------------
    def watched(self, name: str) -> bool:
        """Whether its rate can be judged: a rate alone, over an active phase long enough for a steady window."""
        m = self.members[name]
        return bool(m.alone_rate) and (m.alone_active_s is None or m.alone_active_s >= SETTLE_S + self.window_s)

    def _read(self, name: str, now: float, marks) -> None:
        """The workload's progress: when its active phase began, its work so far, and its live slowdown
        over its latest WINDOW_S of progress once its active phase has run SETTLE_S (`live`; None: no new
        progress, not a steady window yet, or a pause of its own inside the window)."""
        m, st = self.members[name], self.state[name]
        st.live = None
        if marks is None:
            return
        times = marks.progress_times()
        if not times or not m.alone_rate:
            return
        last = times[-1]
        st.done = marks.total_at(m.unit, last)
        if last > st.seen_until:
            st.last_progress_at = now
        if last <= st.seen_until or st.paused_since is not None or not self.watched(name):
            return
        st.seen_until = last
        start = max(st.active_since or times[0], times[0]) + SETTLE_S
        if last - self.window_s >= start and last - self.window_s >= st.resumed_at:
            done = marks.total_at(m.unit, last) - marks.total_at(m.unit, last - self.window_s)
            st.live = m.alone_rate * self.window_s / done if done > 0 else float("inf")
            st.live_from = last - self.window_s
            st.live_max = st.live if st.live_max is None else max(st.live_max, st.live)

    def _in_active(self, name: str) -> bool:
        m, st = self.members[name], self.state[name]
        return m.running() and st.active_since is not None and st.paused_since is None

    def remaining_s(self, name: str) -> float:
        """Its active phase still to go, at its rate alone (0 where not known)."""
        m, st = self.members[name], self.state[name]
        if not m.alone_rate or not m.alone_active_s:
            return 0.0
        return max(0.0, m.alone_active_s - st.done / m.alone_rate)

    def until_left(self, name: str, left_s: float, stopped: Callable[[], bool] = lambda: False) -> str:
        """Block until `name` has at most `left_s` of its active phase (at its rate alone) to go: "left"; its
        process ended: "ended"; nothing to follow (no rate alone, or no progress by the end of its wall time
        alone): "unfollowed"; `stopped()`: "stopped"."""
        m, st = self.members[name], self.state[name]
        if not m.alone_rate or not m.alone_active_s:
            return "unfollowed"
        while True:
            if stopped():
                return "stopped"
            started = m.started()
            if started is not None and not m.running():
                return "ended"
            if st.active_since is not None:
                if self.remaining_s(name) <= left_s:
                    return "left"
            elif m.alone_wall_s is None or (started is not None and time.time() - started > m.alone_wall_s):
                return "unfollowed"
            time.sleep(0.05)

    def _starting(self, name: str) -> bool:
        """Whether it runs, unpaused, and has not begun its active phase (its start-up)."""
        m, st = self.members[name], self.state[name]
        return m.running() and st.active_since is None and st.paused_since is None

    def left_s(self, name: str, now: float) -> float:
        """The seconds until its active phase ends at its rates alone: what is left of its active phase,
        or for a job still starting up or without a rate alone (its active phase cannot be followed), what
        is left of its wall time alone (0 where not known)."""
        m = self.members[name]
        if m.alone_rate and not self._starting(name):
            return self.remaining_s(name)
        started = m.started()
        return max(0.0, (m.alone_wall_s or 0.0) - (now - started)) if started is not None else 0.0

    def projected(self, name: str, now: float, added_s: float, live: float = 1.0) -> float | None:
        """Its slowdown at its end, as it would live it: (seconds since it started + `added_s` + its
        remaining active phase at `live` times its rate alone) / its wall time alone, or, where `added_s`
        would be taken from a job that stops on time, its active phase over what is left of it: the larger,
        since which kind a job is cannot be told from one run (None: not known). A job that has not begun
        its active phase, or has no rate alone, loses no work to a pause: (its wall time alone, or its
        time so far where longer, + `added_s`) / its wall time alone."""
        m, st = self.members[name], self.state[name]
        started = m.started()
        if not m.alone_wall_s or started is None:
            return None
        elapsed = now - started
        if not m.alone_rate or st.active_since is None:
            return (max(elapsed, m.alone_wall_s) + added_s) / m.alone_wall_s
        by_wall = (elapsed + added_s + self.remaining_s(name) * live) / m.alone_wall_s
        active = m.alone_active_s or 0.0
        # a job that stops on time keeps its wall time and loses the work of the seconds taken from what
        # is left of its active phase: its rate falls by as much
        ran = max(0.0, now - st.active_since - self.paused_s(name, st.active_since, now))
        lost = min(added_s, max(0.0, active - ran))
        if lost <= 0 or active <= 0:
            return by_wall
        return max(by_wall, active / max(active - lost, 1e-3))

    def tick(self, now: float) -> None:
        marks = {n: read_marks(m.progress_path) if m.progress_path else None for n, m in self.members.items()}
        for name, m in self.members.items():  # when each began its active phase
            st, mk = self.state[name], marks[name]
            if st.active_since is not None:
                continue
            began = active_start(mk)
            if began is not None:
                st.active_since = began
            elif m.alone_rate is None and m.running():
                st.active_since = now  # it is not watched: its whole run counts as active
        for name in self.members:
            self._read(name, now, marks[name])
        if self.protecting is not None:
            done, st = self.protecting, self.state[self.protecting]
            if self._left_active(done, now):
                why = f"{done}'s active phase ended"
            elif st.live is not None and st.live_from >= self.protected_at and st.live > self.bound:
                self.unhelped.add(done)  # a whole window with the others paused and still beyond: not this group
                why = f"pausing did not help {done} (live {st.live:.2f} with the others paused)"
                self.events.append(Event(now, "unhelped", done, st.live, why))
            else:
                return
            self.protecting = None
            for name in list(self.state):
                if self.state[name].paused_since is not None:
                    self._resume(name, why)
            return
        over = []
        for n in self.members:
            st = self.state[n]
            if not self._in_active(n) or n in self.unhelped or st.live is None or st.live <= self.bound:
                continue
            if now - st.kept_at < self.window_s:
                continue
            others = [o for o in self.members if o != n and (self._in_active(o) or self._starting(o))]
            if others:
                over.append((st.live, n, others))
        if not over:
            return
        live, name, others = max(over)
        self._decide(name, live, others, now, marks[name])

    def _decide(self, name: str, live: float, others: list[str], now: float, marks) -> None:
        """Pause the companions, pause the over job, or let them run on: the way whose worst projected
        slowdown (each job's, as it lives it) is lowest."""
        rest = {o: self.left_s(o, now) for o in others}
        shared = min([self.remaining_s(name) * live] + [rest[o] * (self.state[o].live or 1.0) for o in others])
        ways = {
            "pause the others": {name: self.projected(name, now, 0.0),
                                 **{o: self.projected(o, now, self.remaining_s(name)) for o in others}},
            f"pause {name}": {name: self.projected(name, now, max(rest.values())),
                              **{o: self.projected(o, now, 0.0) for o in others}},
            "run on": {name: self.projected(name, now, shared * (1 - 1 / live)),
                       **{o: self.projected(o, now, shared * (1 - 1 / (self.state[o].live or 1.0)))
                          for o in others}},
        }
        worst = {way: max((x for x in costs.values() if x is not None), default=None) for way, costs in ways.items()}
        known = [w for w in ways if worst[w] is not None]
        # nothing projectable (no walls alone): the companions are paused, as the bound asks
        way = min(known, key=lambda w: (worst[w], w != "pause the others")) if known else "pause the others"
        text = ", ".join(f"{w}: {worst[w]:.2f}" for w in known)
        why = f"{name} is at {live:.2f} > {self.bound:g}" + (f"; projected worst slowdown {text}" if text else "")
        if way == "run on":
            self.state[name].kept_at = now
            self.events.append(Event(now, "kept", name, live, why))
            return
        self.events.append(Event(now, "over", name, live, why, self._lost(name, marks)))
        paused = others if way == "pause the others" else [name]
        protected = name if way == "pause the others" else (others[0] if len(others) == 1 else name)
        self.echo(f"radt-ext guard: {name} live slowdown {live:.2f} > {self.bound:g}: pausing {', '.join(paused)} "
                  f"({why})")
        self.protecting, self.protected_at = protected, now
        for n in paused:
            self.state[n].live = None
            self._pause(n, why, live)

    def _lost(self, name: str, marks) -> float | None:
        """The seconds the job ran in its active phase so far, less the seconds its progress then would
        have taken alone: what sharing cost it before the split."""
        m, st = self.members[name], self.state[name]
        times = marks.progress_times() if marks is not None else []
        if st.active_since is None or not times or not m.alone_rate or times[-1] <= st.active_since:
            return None
        since, last = st.active_since, times[-1]
        running = last - since - self.paused_s(name, since, last)
        done = marks.total_at(m.unit, last) - marks.total_at(m.unit, since)
        return max(0.0, running - done / m.alone_rate)

    def lost_s(self, name: str | None = None) -> float:
        """The seconds lost before each split (over events), of one workload or of all."""
        return sum(e.lost_s or 0.0 for e in self.events if e.action == "over" and name in (None, e.name))

    def _left_active(self, name: str, now: float) -> bool:
        m, st = self.members[name], self.state[name]
        if not m.running():
            return True
        marks = read_marks(m.progress_path) if m.progress_path else None
        if marks is not None and marks.phases:
            opened = sum(1 for _, _, e in marks.phases if e == "start")
            closed = sum(1 for _, _, e in marks.phases if e == "end")
            if opened and closed >= opened:
                return True
        return st.last_progress_at is not None and now - st.last_progress_at > self.idle_s

    # -- signals ------------------------------------------------------------------------------
    def _pause(self, name: str, why: str, live: float | None) -> None:
        m, st = self.members[name], self.state[name]
        for _ in range(LOCK_TRIES):
            pids = m.pids()
            if not pids:
                return
            stopped = signal_pids(pids, signal.SIGSTOP)
            if not set(stopped) & locked_pids(self.lock_paths):
                st.paused_since = time.time()
                self.events.append(Event(st.paused_since, "pause", name, live, why))
                return
            signal_pids(stopped, signal.SIGCONT)  # stopped holding a lock (a store's): let it run on
            time.sleep(LOCK_RETRY_S)
        self.events.append(Event(time.time(), "deferred", name, live, "it kept holding a file lock"))

    def _resume(self, name: str, why: str) -> None:
        m, st = self.members[name], self.state[name]
        signal_pids(m.pids(), signal.SIGCONT)
        now = time.time()
        st.paused.append((st.paused_since, now))
        st.paused_since, st.resumed_at = None, now
        self.events.append(Event(now, "resume", name, None, why))
        self.echo(f"radt-ext guard: {name} resumed ({why}), paused {now - st.paused[-1][0]:.1f} s")

    # -- results ------------------------------------------------------------------------------
    def paused_spans(self, name: str) -> list[tuple[float, float]]:
        st = self.state[name]
        return list(st.paused) + ([(st.paused_since, time.time())] if st.paused_since is not None else [])

    def paused_s(self, name: str, start: float = float("-inf"), end: float = float("inf")) -> float:
        """Seconds the workload was paused within [start, end]."""
        st = self.state[name]
        spans = st.paused + ([(st.paused_since, time.time())] if st.paused_since is not None else [])
        return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)

    def summary(self, name: str) -> dict[str, float]:
        st = self.state[name]
        out = {"guard_paused_s": self.paused_s(name), "guard_pauses": float(len(st.paused))}
        if st.live_max is not None and st.live_max != float("inf"):
            out["guard_live_slowdown_max"] = st.live_max
        if self.lost_s(name):
            out["guard_lost_s"] = self.lost_s(name)
        return out

    def member_text(self, name: str) -> str:
        """The events that concern one workload, with what was done to it."""
        mine = "; ".join(e.text(self.t0) for e in self.events if e.name == name)
        watched = "watched" if self.members[name].alone_rate else \
            "not watched (no exclusive throughput to compare its progress with)"
        return f"{watched}; {mine}" if mine else f"{watched}, no action (max slowdown {self.bound:g})"

    def log_text(self) -> str:
        return "; ".join(e.text(self.t0) for e in self.events) or "no action"
