"""A long-lived tool process (nvidia-smi -lms, dcgmi dmon, perf stat -I) read line by line.

A reader thread takes each line as it arrives, stamps it with the time it was
received, and hands it to a parser. What the parser returns (a list of readings)
waits in a queue until the listener's `sample()` drains it. Lines the parser
cannot use are kept (the last few) so that a process that dies can be reported
with its own words.
"""
from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import threading
import time
from typing import Callable, Sequence

from listeners.base import ListenerError, Reading

# The tool writes at the listener's interval and each line is stamped as it arrives, so the monitor only
# needs to drain the queue now and then: a listener's sample() comes at most this often.
DRAIN_EVERY_S = 1.0

# parser(line, received_time) -> readings (possibly empty); raising counts as "unusable line"
Parser = Callable[[str, float], "list[Reading] | None"]


class StreamingProcess:
    def __init__(self, argv: Sequence[str], parse: Parser, env: dict[str, str] | None = None):
        self.argv = list(argv)
        self.parse = parse
        self.env = env
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue[Reading] = queue.Queue()
        self._unused: collections.deque[str] = collections.deque(maxlen=5)
        self._stopping = False

    @property
    def tool(self) -> str:
        return os.path.basename(self.argv[0])

    def start(self, wait_first: float = 0.0) -> None:
        """Start the process; with `wait_first`, wait that long for its first line and raise
        ListenerError at once if it exits without producing a usable one."""
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,  # perf writes its CSV to stderr; errors land here too
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",  # one undecodable byte must not end the reader (and block the tool)
                bufsize=1,
                env=self.env,
                start_new_session=True,  # a Ctrl-C to the monitor's group does not hit the tool first
            )
        except OSError as exc:
            raise ListenerError(f"cannot start {self.tool}: {exc.strerror or exc}") from None
        self._thread = threading.Thread(target=self._read, name=f"{self.tool}-reader", daemon=True)
        self._thread.start()
        if wait_first > 0:  # a tool that refuses its arguments says so at once: report it at open()
            deadline = time.time() + wait_first
            while time.time() < deadline and self._queue.empty():
                if self._proc.poll() is not None:
                    self._thread.join(1.0)
                    if self._queue.empty():
                        message = self._death_message()
                        self.stop()  # what the tool started may still hold the pipe
                        raise ListenerError(message)
                    break
                time.sleep(0.02)

    def _read(self) -> None:
        assert self._proc and self._proc.stdout
        for line in self._proc.stdout:
            received = time.time()
            line = line.rstrip("\r\n")
            try:
                readings = self.parse(line, received)
            except Exception:
                readings = None
            if readings is None:
                if line.strip():
                    self._unused.append(line.strip())
            else:
                for reading in readings:
                    self._queue.put(reading)

    def drain(self) -> list[Reading]:
        """Everything read since the last call. Raises ListenerError once the process has
        died and everything it wrote has been handed out."""
        out: list[Reading] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                break
        if out or self._proc is None or self._stopping:
            return out
        if self._proc.poll() is not None:
            if self._thread:
                self._thread.join(1.0)
            while not self._queue.empty():
                out.append(self._queue.get_nowait())
            if not out:
                raise ListenerError(self._death_message())
        return out

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def _death_message(self) -> str:
        code = self._proc.poll() if self._proc else None
        last = self._unused[-1] if self._unused else "no output"
        return f"{self.tool} exited with code {code}: {last}"[:300]

    def stop(self, timeout: float = 2.0) -> None:
        """Terminate the tool's process group (the tool and whatever it started), wait, kill
        what is left, reap: never leaves a zombie, nor a process holding the pipe."""
        self._stopping = True
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
        if self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():  # something the tool started still holds the pipe
                self._signal_group(signal.SIGKILL)
                self._thread.join(timeout)
        proc.wait()
        # closing the pipe while the reader is blocked in it would wait for that read forever
        if proc.stdout and not (self._thread and self._thread.is_alive()):
            proc.stdout.close()

    def _signal_group(self, sig: int) -> None:
        assert self._proc is not None
        try:
            os.killpg(self._proc.pid, sig)  # start_new_session: the group id is the tool's pid
        except (ProcessLookupError, PermissionError):
            pass
