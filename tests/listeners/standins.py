"""Helpers for tests that run the real subprocess path against the stand-in tools in tests/listeners/bin."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
FIXTURES = HERE / "fixtures"


def smi_fixture_dir() -> Path:
    """The nvidia-smi recording from the GPU machine (what the stand-in replays by default)."""
    return FIXTURES / "smi"


def use_standins(monkeypatch, tmp_path) -> Path:
    """Put the stand-ins first on PATH; return the file where they log their argv."""
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_ARGV_LOG", str(log))
    return log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def collect(listener, count: int, timeout: float = 10.0) -> list:
    """Sample until `count` readings arrived (or timeout); returns them all."""
    out: list = []
    deadline = time.time() + timeout
    while len(out) < count and time.time() < deadline:
        out.extend(listener.sample())
        time.sleep(0.05)
    return out
