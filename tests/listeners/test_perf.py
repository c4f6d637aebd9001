"""perf listener: the real `perf stat -I` path against a real process tree where perf can count,
and the parser against perf output recorded on this kind of machine."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings, strategies as st

from listeners.base import Target
from listeners.perf import IntervalParser, PerfListener
from standins import FIXTURES, HERE


class SoftwarePerf(PerfListener):
    """The same listener on software events, which count even in a VM without a PMU."""

    events = ("task-clock", "context-switches", "page-faults")


def run_tree(listener_cls, seconds: float, tmp_path):
    workload = subprocess.Popen([sys.executable, str(HERE / "workload_tree.py"), str(seconds), str(tmp_path / "o")])
    listener = listener_cls(Target(pid=workload.pid), 0.25)
    listener.open()
    readings = []
    try:
        while True:  # wait4: the tree's own CPU time (the workload waits for its child) to compare with
            pid, status, usage = os.wait4(workload.pid, os.WNOHANG)
            if pid:
                workload.returncode = os.waitstatus_to_exitcode(status)
                break
            time.sleep(0.25)
            readings.extend(listener.sample())
        deadline = time.time() + 3  # perf ends by itself after the workload; collect the tail
        while time.time() < deadline and listener.stream.returncode is None:
            time.sleep(0.1)
        readings.extend(listener.sample())
    finally:
        listener.close()
    return workload, readings, usage.ru_utime + usage.ru_stime


def test_probe_says_why_hardware_counters_are_unavailable_or_none():
    reason = PerfListener.probe(Target())
    if shutil.which("perf") is None:
        assert reason.startswith("perf not found")
    else:
        assert reason is None or ("instructions" in reason and "\n" not in reason)


def test_probe_reports_missing_perf(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert PerfListener.probe(Target()).startswith("perf not found")


@pytest.mark.skipif(SoftwarePerf.probe(Target()) is not None, reason=str(SoftwarePerf.probe(Target())))
def test_software_counters_follow_the_tree_including_the_grandchild(tmp_path):
    workload, readings, tree_cpu_s = run_tree(SoftwarePerf, 1.5, tmp_path)
    assert workload.returncode == 0 and len(readings) >= 4
    cpu_s = [r.values.get("perf_task_clock_s", 0.0) for r in readings]
    # the kernel's own account of the tree's CPU time; half of it is the grandchild's
    print(f"perf {sum(cpu_s):.3f} s vs rusage {tree_cpu_s:.3f} s")
    assert 0.75 * tree_cpu_s < sum(cpu_s) < 1.1 * tree_cpu_s
    times = [r.time for r in readings]
    assert times == sorted(times) and abs(times[-1] - time.time()) < 10


@pytest.mark.skipif(PerfListener.probe(Target()) is not None, reason=str(PerfListener.probe(Target())))
def test_hardware_counters_and_ipc(tmp_path):
    workload, readings, _ = run_tree(PerfListener, 1.5, tmp_path)
    busy = [r.values for r in readings if r.values.get("perf_instructions_count", 0) > 1e6]
    assert busy
    for v in busy:
        assert v["perf_ipc_ratio"] == pytest.approx(v["perf_instructions_count"] / v["perf_cycles_count"])
        assert v["perf_cycles_count"] > 0 and "perf_cache_misses_count" in v


def replay(lines: list[str]):
    parse = IntervalParser(started=1000.0)
    out = []
    for line in lines:
        result = parse(line, 0.0)
        assert result is None or isinstance(result, list)
        out.extend(result or [])
    return out + parse.flush()


def test_parses_recorded_software_output():
    lines = (FIXTURES / "perf" / "software.csv").read_text().splitlines()
    readings = replay(lines)
    recorded = [l.split(",") for l in lines if ",task-clock," in l]
    assert len(readings) == len(recorded)
    for r, cells in zip(readings, recorded):
        assert r.time == pytest.approx(1000.0 + float(cells[0]))
        assert r.values["perf_task_clock_s"] == pytest.approx(float(cells[1]) / 1000)
        assert "perf_context_switches_count" in r.values and "perf_page_faults_count" in r.values


def test_not_supported_is_left_out():
    lines = (FIXTURES / "perf" / "hw_not_supported.csv").read_text().splitlines()
    assert lines and replay(lines) == []


def test_hardware_lines_in_perfs_csv_layout():
    lines = ["     1.000123456,2000000,,cycles,1000000,100.00,,",
             "     1.000123456,3000000,,instructions,1000000,100.00,1.50,insn per cycle",
             "     1.000123456,<not counted>,,cache-misses,0,0.00,,",
             "     1.000123456,1234,,branch-misses:u,1000000,100.00,,",
             "     2.000234567,1000,,cycles,1000000,100.00,,"]
    first, second = replay(lines)
    assert first.values == {"perf_cycles_count": 2e6, "perf_instructions_count": 3e6, "perf_ipc_ratio": 1.5,
                            "perf_branch_misses_count": 1234.0}
    assert second.values == {"perf_cycles_count": 1000.0}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=120), max_size=6))
def test_arbitrary_lines_never_raise(lines):
    replay(lines)
