"""log_progress and phase: records survive to the end even though writes are throttled; phases and
several processes' totals read back as the session sees them."""
import json
import subprocess
import sys
import textwrap

import pytest

from radt_ext.workload_api.progress import read_marks, read_progress

ENV = {"PATH": "/usr/bin:/bin"}


def _run(script: str, path) -> None:
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                         env={**ENV, "RADT_EXT_PROGRESS_FILE": str(path), "PYTHONPATH": ":".join(sys.path)},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def test_totals_reach_the_file_at_exit_despite_throttling(tmp_path):
    path = tmp_path / "progress.jsonl"
    _run("""
        import radt_ext
        for _ in range(10000):
            radt_ext.log_progress(samples=3, flops=2.0)
    """, path)
    totals = read_progress(str(path))
    assert totals["samples"] == 30000 and totals["flops"] == 20000.0
    assert len(path.read_text().splitlines()) < 100  # throttled: not a line per call


def test_first_call_is_recorded_at_once_with_its_time(tmp_path):
    path = tmp_path / "progress.jsonl"
    _run("""
        import time, radt_ext
        radt_ext.log_progress(samples=1)
        time.sleep(0.8)
        radt_ext.log_progress(samples=1)
    """, path)
    marks = read_marks(str(path))
    times = marks.progress_times()
    assert len(times) == 2 and times[1] - times[0] >= 0.7
    assert marks.total_at("samples", times[0]) == 1.0 and marks.total_at("samples", times[1]) == 2.0


def test_phases_and_the_totals_at_their_edges(tmp_path):
    path = tmp_path / "progress.jsonl"
    _run("""
        import time, radt_ext
        radt_ext.log_progress(samples=5)  # before the phase: start-up work
        with radt_ext.phase("train"):
            for _ in range(4):
                radt_ext.log_progress(samples=10)
                time.sleep(0.05)
        with radt_ext.phase("eval"):
            time.sleep(0.1)
    """, path)
    marks = read_marks(str(path))
    first, last = marks.phase_span()
    train = [t for t, name, _ in marks.phases if name == "train"]
    assert first == train[0] and last == max(t for t, _, _ in marks.phases)
    assert marks.total_at("samples", train[1]) - marks.total_at("samples", train[0]) == pytest.approx(40.0)
    seconds = marks.phase_seconds()
    assert set(seconds) == {"train", "eval"} and seconds["eval"] >= 0.09


def test_several_processes_add_up(tmp_path):
    path = tmp_path / "progress.jsonl"
    script = """
        import radt_ext
        for _ in range(100):
            radt_ext.log_progress(samples=2)
    """
    _run(script, path)
    _run(script, path)
    assert read_progress(str(path))["samples"] == 400.0


def test_unreadable_or_partial_lines_are_skipped(tmp_path):
    path = tmp_path / "p.jsonl"
    assert read_progress(str(path)) == {}
    path.write_text('{"pid": 1, "t": 1.0, "samples": 1')
    assert read_progress(str(path)) == {}
    path.write_text(json.dumps({"pid": 1, "t": 2.0, "samples": 5, "note": "x"}) + "\n" + '{"pid": 1, "t": 3')
    assert read_progress(str(path)) == {"samples": 5.0, "time": 2.0}


def test_a_bad_phase_name_says_what_to_use():
    import radt_ext

    with pytest.raises(ValueError, match="letters, digits"):
        with radt_ext.phase("train step/1"):
            pass
