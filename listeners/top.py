"""CPU, memory and I/O of the workload's own process tree (psutil), plus the host's totals.

The tree (Target.pid and every descendant) is listed again once a second (a listing
walks /proc: every process of the host; `listeners/process_tree.py` shares it with `gpu_procs`)
and at the next sample after a member vanished,
so workers started later are counted within a second and finished ones drop out. Each
member's CPU and memory are read every sample; its threads and I/O, and the host's CPU and memory,
about once a second (every sample at intervals of a second or more), as each costs another
/proc file a process (the host's CPU is then its average over that second). CPU percentages
need two readings of the same process; psutil keeps the previous one on the
Process object, so those objects are kept between samples (keyed by pid and
creation time, so a reused pid is a new process).

I/O is cumulative since open(). When a parent reaps a child, Linux adds the child's
I/O to the parent's own counters; so a member that leaves while its parent is still
in the tree is counted from then on through the parent, and only one whose parent has
left too (the root, an orphan) keeps its last reading here.
"""
from __future__ import annotations

import time

import psutil

from listeners import process_tree as tree
from listeners.base import Listener, ListenerError, Target

MIB = 1024 * 1024
GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
LIST_EVERY_S = tree.LIST_EVERY_S


class TopListener(Listener):
    name = "top"
    description = "CPU %, RSS, threads and I/O of the workload's process tree; host CPU and memory"
    default_interval = 1.0

    @classmethod
    def probe(cls, target: Target) -> str | None:
        if target.pid is not None and not psutil.pid_exists(target.pid):
            return f"workload process {target.pid} does not exist"
        return None

    def open(self) -> None:
        self._procs: dict[tuple[int, float], psutil.Process] = {}
        self._io_start: dict[tuple[int, float], tuple[int, int]] = {}
        self._io_done = [0, 0]  # bytes read/written by tree members that have since exited
        self._io_last: dict[tuple[int, float], tuple[int, int]] = {}
        self._ppid: dict[tuple[int, float], int] = {}
        self._members: list[tuple[tuple[int, float], psutil.Process]] = []
        self._listed_at = float("-inf")  # time.monotonic() of the last listing
        self._reads = 0
        psutil.cpu_percent(None)  # the first call only sets the baseline
        if self.target.pid is not None:
            try:
                self._root = psutil.Process(self.target.pid)
            except psutil.NoSuchProcess:
                raise ListenerError(f"workload process {self.target.pid} does not exist") from None
            for key, proc in self._tree():  # I/O counts from open() for processes already running
                try:
                    io = proc.io_counters()
                    self._io_start[key] = (io.read_bytes, io.write_bytes)
                except (AttributeError, *GONE):
                    pass

    def _tree(self) -> list[tuple[tuple[int, float], psutil.Process]]:
        now = time.monotonic()
        if now - self._listed_at < LIST_EVERY_S:
            return self._members
        # a member just vanished (_listed_at -inf): a listing of now; else `gpu_procs`' of this tick will do
        max_age = 0.0 if self._listed_at == float("-inf") else LIST_EVERY_S / 2
        self._listed_at = now
        try:
            members = tree.members(self._root, max_age)
        except GONE:
            members = []
        current: dict[tuple[int, float], psutil.Process] = {}
        for proc in members:
            try:
                with proc.oneshot():
                    key = (proc.pid, proc.create_time())
                    ppid = proc.ppid()
            except GONE:
                continue
            if key not in self._procs:
                try:
                    proc.cpu_percent(None)  # baseline; counts from the next sample on
                except GONE:
                    continue
            current[key] = self._procs.get(key, proc)
            self._ppid[key] = ppid
        pids = {pid for pid, _ in current}
        for key in set(self._procs) - set(current):  # exited: keep what it read and wrote
            last = self._io_last.pop(key, None)
            start = self._io_start.pop(key, (0, 0))
            ppid = self._ppid.pop(key, None)
            if last and ppid not in pids:  # else its parent reaped it and counts it from now on
                self._io_done[0] += last[0] - start[0]
                self._io_done[1] += last[1] - start[1]
        self._procs = current
        self._members = list(current.items())
        return self._members

    def read(self) -> dict[str, float]:
        values: dict[str, float] = {}
        # threads, I/O and the host's memory change slowly and cost a /proc file each: about once a second
        full = self._reads % max(1, round(LIST_EVERY_S / self.interval)) == 0
        self._reads += 1
        if self.target.pid is not None and hasattr(self, "_root"):
            cpu = rss = threads = count = 0.0
            tree = self._tree()
            io_read, io_write = self._io_done  # after _tree(): it adds the members that just left
            for key, proc in tree:
                io_now = None
                try:
                    with proc.oneshot():
                        cpu_now = proc.cpu_percent(None)
                        rss_now = proc.memory_info().rss
                        if full:
                            threads += proc.num_threads()
                            try:
                                io = proc.io_counters()
                                io_now = (io.read_bytes, io.write_bytes)
                            except (AttributeError, psutil.AccessDenied):
                                pass
                except GONE as exc:
                    if isinstance(exc, psutil.NoSuchProcess):  # exited since the listing: list again next time
                        self._listed_at = float("-inf")
                        last = self._io_last.get(key)
                        if last and self._ppid.get(key) not in {pid for pid, _ in self._procs}:
                            start = self._io_start.get(key, (0, 0))  # as the listing will count it
                            io_read += last[0] - start[0]
                            io_write += last[1] - start[1]
                    continue
                cpu += cpu_now
                rss += rss_now
                count += 1
                if io_now is not None:
                    start = self._io_start.setdefault(key, (0, 0))  # started after open(): all of it
                    self._io_last[key] = io_now
                    io_read += io_now[0] - start[0]
                    io_write += io_now[1] - start[1]
            values.update(proc_cpu_pct=cpu, proc_rss_mib=rss / MIB, proc_count=count)
            if full:
                values.update(proc_threads_count=threads, proc_read_mib=io_read / MIB, proc_write_mib=io_write / MIB)
        if full:  # the host's CPU since the last read: its average over about a second
            values["host_cpu_pct"] = psutil.cpu_percent(None)
            memory = psutil.virtual_memory()
            values.update(host_mem_used_mib=(memory.total - memory.available) / MIB, host_mem_pct=memory.percent)
        return values
