"""A workload's stderr tail is kept and passed through even where our own sys.stderr has no file
descriptor (a notebook's stream, pytest's capture): the bytes go to the process's fd 2."""
from __future__ import annotations

import io
import os
import sys

from radt_ext.run.stderr_tail import StderrTail


def test_the_tail_is_kept_where_sys_stderr_has_no_descriptor(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # io.UnsupportedOperation on fileno()
    read, write = os.pipe()
    tail = StderrTail(read)
    assert tail.passthrough == 2
    os.write(write, b"Traceback (most recent call last):\nRuntimeError: boom\n")
    os.close(write)
    tail.close()
    assert tail.tag() == "Traceback (most recent call last):\nRuntimeError: boom"
