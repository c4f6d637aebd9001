"""Every process a workload started, including ones that left its process group.

Killing the workload's process group misses a descendant that called setsid()
(or a daemon that double-forked). So while the workload runs, a thread records
its descendants with psutil (pid + create time, so a reused pid is never
signalled); once seen, a process stays tracked after its parent dies. A process
born and escaped between two polls is still found at the end: it inherits the
workload's environment, which carries the session's marker (RADT_EXT_ACTIVE: a handed-over run's
id, else a key of this session; markers.py).
"""
from __future__ import annotations

import os
import threading

import psutil

# A poll lists the host's processes (psutil reads every one to find the children): a few ms on a host
# with a few hundred. Once a second; one that escapes between polls is found by its marker at the end.
POLL_S = 1.0


class ProcessTree:
    def __init__(self, root_pid: int | None, marker: tuple[str, str] | None = None, poll: float = POLL_S):
        self.root_pid = root_pid
        self.marker = marker  # (environment variable, value) every descendant inherits
        self.poll = poll
        self._known: dict[int, float] = {}  # pid -> create_time
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"radt-tree-{root_pid or 'marker'}", daemon=True)

    def start(self) -> "ProcessTree":
        self._scan()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            self._scan()

    def _scan(self) -> None:
        roots = [pid for pid in (self.root_pid, *self._known) if pid is not None]
        found: dict[int, float] = {}
        for pid in roots:
            try:
                proc = psutil.Process(pid)
                if pid != self.root_pid and self._known.get(pid) != proc.create_time():
                    continue  # pid reused by a stranger
                for child in proc.children(recursive=True):
                    found[child.pid] = child.create_time()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        with self._lock:
            for pid, created in found.items():
                self._known.setdefault(pid, created)

    def survivors(self) -> list[psutil.Process]:
        """Tracked processes still alive (not zombies), plus strangers carrying the run's marker."""
        self._scan()
        me = os.getpid()
        out: dict[int, psutil.Process] = {}
        with self._lock:
            known = dict(self._known)
        for pid, created in known.items():
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    out[pid] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if self.marker:
            ancestors = {p.pid for p in psutil.Process(me).parents()} | {me}
            name, value = self.marker
            for proc in psutil.process_iter():
                if proc.pid in out or proc.pid in ancestors:
                    continue
                try:
                    if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(name) == value:
                        out[proc.pid] = proc
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
                    continue
        return list(out.values())

    def signal(self, sig: int) -> list[int]:
        """Send sig to every survivor; returns the pids signalled."""
        hit = []
        for proc in self.survivors():
            try:
                proc.send_signal(sig)
                hit.append(proc.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return hit
