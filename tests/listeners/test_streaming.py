"""StreamingProcess against real tool processes that start processes of their own (a wrapper
script that runs the real tool without exec): stop() and a failed start() end all of them."""
from __future__ import annotations

import sys
import time

import psutil
import pytest

from listeners.base import ListenerError, Reading
from listeners.streaming import StreamingProcess


def gone(pid: int, wait: float = 30.0) -> bool:
    """True once `pid` has exited (a zombie counts: it runs no more)."""
    deadline = time.time() + wait
    while time.time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def script(path, body: str):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def pid_line(line: str, received: float):
    return [Reading(received, {"pid": float(line)})] if line.strip().isdigit() else None


@pytest.mark.timeout(60, method="thread")  # the bug this guards against is a stop() that never returns
def test_stop_ends_a_silent_process_the_tool_started(tmp_path):
    # the wrapper's child prints its pid, then holds the pipe without writing
    tool = script(tmp_path / "tool", f'"{sys.executable}" -c "import os, time; '
                                     f'print(os.getpid(), flush=True); time.sleep(600)"\n')
    stream = StreamingProcess([tool], pid_line)
    stream.start(wait_first=30)
    readings = []
    deadline = time.time() + 30
    while not readings and time.time() < deadline:
        readings = stream.drain()
        time.sleep(0.05)
    child = int(readings[0].values["pid"])
    stream.stop(timeout=1.0)
    assert gone(child), "the tool's own child was left running after stop()"


@pytest.mark.timeout(60, method="thread")
def test_a_tool_that_fails_at_start_leaves_nothing_running(tmp_path):
    pidfile = tmp_path / "child.pid"
    tool = script(tmp_path / "tool", f'"{sys.executable}" -c "import os, time; '
                                     f"open('{pidfile}', 'w').write(str(os.getpid())); time.sleep(600)\" &\n"
                                     f'while [ ! -s "{pidfile}" ]; do sleep 0.01; done\n'
                                     'echo "bad arguments"\nexit 2\n')
    stream = StreamingProcess([tool], pid_line)
    with pytest.raises(ListenerError, match="exited with code 2: bad arguments"):
        stream.start(wait_first=30)
    assert gone(int(pidfile.read_text())), "a failed start() left the tool's child running"


@pytest.mark.timeout(60, method="thread")
def test_a_line_that_is_not_utf8_does_not_end_the_reading(tmp_path):
    # a tool's message in a Latin-1 locale ("échec"), then a usable line
    tool = script(tmp_path / "tool", "printf '\\351chec\\n42\\n'\nexec sleep 600\n")
    stream = StreamingProcess([tool], pid_line)
    try:
        stream.start(wait_first=30)
        readings = stream.drain()
    finally:
        stream.stop(timeout=1.0)
    assert [r.values for r in readings] == [{"pid": 42.0}]
