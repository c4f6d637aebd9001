"""A guard beside a running collocation group: it keeps each workload's slowdown within a bound.

Every TICK_S it reads each workload's live progress (the records `radt_ext.log_progress` appends to the
workload's progress file) and compares its rate with its exclusive run's active-phase throughput:
live slowdown = alone rate / live rate, over its latest WINDOW_S of progress, and since every workload
of the group began its active phase (the window the group measures slowdowns over; once it is
MIN_OVERLAP_S long, its own paused seconds left out), so that contention which starts late in a job's
active phase is caught before it dominates a short overlap. A workload above the bound by either is
*protected*: every other workload of the group still running is paused (SIGSTOP to its whole process
tree; where every workload has a weight, how hard it presses on the GPU alone, the heaviest first, and
the next heaviest each time a whole WINDOW_S later it is still beyond the bound, so the rest keep
sharing) until the protected one's active phase ends (its process exits, its phases close, or it
reports no progress for IDLE_S) or a whole WINDOW_S with all of them paused still finds it beyond the
bound (what slows it is not in this group: it is not protected again), then resumed (SIGCONT). Each
`over` carries the seconds the protected workload had lost by then (its running time since every
workload was active, less what its progress then took alone). A process is never left stopped holding
a lock on the files given (a SQLite store's; any file where none are given): the guard looks in
/proc/locks after stopping it and, where it holds one, lets it run on and tries again shortly.

A paused workload is held back as a job waiting in a queue is: the seconds it spends paused are its
`paused` intervals, which the group leaves out of its slowdown (and keeps in its wall time).

A workload that reports no progress cannot be watched: it is never protected, only paused for others.
Every decision is an Event (time, action, workload, live slowdown, why), for the group's tags.
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
MIN_OVERLAP_S = 1.0  # ... and since every workload was active, once that is this long
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
    weight: float | None = None  # how hard it presses on the GPU alone (None: not known; see Guard)
    unit: str = "samples"  # what alone_rate counts: samples, or steps where the job's samples are not known


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
    cum: float | None = None
    live_max: float | None = None
    paused_since: float | None = None
    paused: list[tuple[float, float]] = field(default_factory=list)
    resumed_at: float = 0.0


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


class Guard:
    def __init__(self, members: list[Member], bound: float, echo: Callable[[str], None] | None = None,
                 window_s: float = WINDOW_S, tick_s: float = TICK_S, idle_s: float = IDLE_S,
                 min_overlap_s: float = MIN_OVERLAP_S, lock_paths: list[str] | None = None):
        self.members = {m.name: m for m in members}
        self.bound = bound
        self.echo = echo or (lambda line: None)
        self.window_s, self.tick_s, self.idle_s, self.min_overlap_s = window_s, tick_s, idle_s, min_overlap_s
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
    def _read(self, name: str, now: float, marks) -> None:
        """The workload's progress: when its active phase began, its live slowdown over its latest
        WINDOW_S of progress (`live`; None: no new progress, not a whole window yet, or a pause of its
        own inside the window, which would read as a slowdown) and its slowdown since `since`, its
        paused seconds left out (`cum`: the figure the group measures over its overlap)."""
        m, st = self.members[name], self.state[name]
        st.live = st.cum = None
        if marks is None:
            return
        times = marks.progress_times()
        if not times or not m.alone_rate:
            return
        last = times[-1]
        if last > st.seen_until:
            st.last_progress_at = now
        if last <= st.seen_until or st.paused_since is not None:
            return
        st.seen_until = last
        if last - times[0] >= self.window_s and last - self.window_s >= st.resumed_at:
            done = marks.total_at(m.unit, last) - marks.total_at(m.unit, last - self.window_s)
            st.live = m.alone_rate * self.window_s / done if done > 0 else float("inf")
            st.live_from = last - self.window_s
            st.live_max = st.live if st.live_max is None else max(st.live_max, st.live)
        since = self.overlap_since
        if since is not None and last - since >= self.min_overlap_s:
            running, done = self._work_since(name, marks, since, last)
            if running >= self.min_overlap_s:
                st.cum = m.alone_rate * running / done if done > 0 else float("inf")
                st.live_max = st.cum if st.live_max is None else max(st.live_max, st.cum)

    @property
    def overlap_since(self) -> float | None:
        """When every workload of the group had begun its active phase (None: not all yet)."""
        starts = [self.state[n].active_since for n in self.members]
        return max(starts) if starts and None not in starts else None

    def tick(self, now: float) -> None:
        marks = {n: read_marks(m.progress_path) if m.progress_path else None for n, m in self.members.items()}
        for name, m in self.members.items():  # first when each began: the window the group measures over
            st, mk = self.state[name], marks[name]
            if st.active_since is not None:
                continue
            starts = (mk.progress_times()[:1] + [t for t, _, e in mk.phases if e == "start"][:1]) if mk else []
            if starts:
                st.active_since = min(starts)
            elif m.alone_rate is None and m.running():
                st.active_since = now  # it is not watched: its whole run counts as active
        for name in self.members:
            self._read(name, now, marks[name])
        if self.protecting is not None:
            done, st = self.protecting, self.state[self.protecting]
            if self._left_active(done, now):
                why = f"{done}'s active phase ended"
            elif st.live is not None and st.live_from >= self.protected_at and st.live > self.bound:
                rest = [n for n, m in self.members.items()
                        if n != done and m.running() and self.state[n].paused_since is None]
                if rest:  # the heaviest companions paused were not enough: the next heaviest too
                    live, self.protected_at = st.live, now
                    st.live = st.cum = None
                    for other in self._first_to_pause(rest):
                        self._pause(other, f"{done} is still at {live:.2f} > {self.bound:g}", live)
                    return
                # a whole window with the others paused and still beyond: what slows it is not this group
                self.unhelped.add(done)
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
        for n, m in self.members.items():
            st = self.state[n]
            if not m.running() or st.paused_since is not None or n in self.unhelped:
                continue
            if st.live is not None and st.live > self.bound:
                over.append((st.live, n, f"slowdown over the last {self.window_s:g} s > {self.bound:g}"))
            elif st.cum is not None and st.cum > self.bound:
                over.append((st.cum, n, f"slowdown since every job was active > {self.bound:g}"))
        if not over:
            return
        live, name, why = max(over)
        others = [n for n, m in self.members.items() if n != name and m.running()]
        if not others:
            return
        self.events.append(Event(now, "over", name, live, why, self._lost(name, marks[name])))
        first = self._first_to_pause(others)
        self.echo(f"radt-ext guard: {name} live slowdown {live:.2f} > {self.bound:g}: pausing "
                  f"{', '.join(first)}")
        self.protecting, self.protected_at = name, now
        self.state[name].live = self.state[name].cum = None
        for other in first:
            self._pause(other, f"{name} is at {live:.2f} > {self.bound:g}", live)

    def _first_to_pause(self, others: list[str]) -> list[str]:
        """The companions to pause first for a job beyond the bound: where each has a weight (how hard it
        presses on the GPU alone), the heaviest, so the others keep sharing; else all of them."""
        if len(others) > 1 and all(self.members[n].weight is not None for n in others):
            return [max(others, key=lambda n: (self.members[n].weight, n))]
        return others

    def _lost(self, name: str, marks) -> float | None:
        """The seconds the job ran beside the others since every job was active (else since its own
        active phase began), less the seconds its progress then would have taken alone: what sharing
        cost it before the split."""
        m, st = self.members[name], self.state[name]
        since = self.overlap_since if self.overlap_since is not None else st.active_since
        times = marks.progress_times() if marks is not None else []
        if since is None or not times or not m.alone_rate or times[-1] <= since:
            return None
        running, done = self._work_since(name, marks, since, times[-1])
        return max(0.0, running - done / m.alone_rate)

    def _work_since(self, name: str, marks, since: float, last: float) -> tuple[float, float]:
        """The seconds the job ran from `since` to `last` (its own pauses left out), and the work it did."""
        unit = self.members[name].unit
        return last - since - self.paused_s(name, since, last), marks.total_at(unit, last) - marks.total_at(unit, since)

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
