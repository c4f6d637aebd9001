"""log_progress: totals survive to the end even though writes are throttled."""
import json
import subprocess
import sys
import textwrap

from radt_ext.progress import read_progress


def test_totals_reach_the_file_at_exit_despite_throttling(tmp_path):
    path = tmp_path / "progress.json"
    script = textwrap.dedent("""
        import radt_ext
        for _ in range(10000):
            radt_ext.log_progress(samples=3, flops=2.0)
    """)
    res = subprocess.run([sys.executable, "-c", script], env={"RADT_EXT_PROGRESS_FILE": str(path),
                         "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    totals = read_progress(str(path))
    assert totals["samples"] == 30000 and totals["flops"] == 20000.0


def test_unreadable_or_partial_file_reads_as_no_progress(tmp_path):
    path = tmp_path / "p.json"
    assert read_progress(str(path)) == {}
    path.write_text('{"samples": 1')
    assert read_progress(str(path)) == {}
    path.write_text(json.dumps({"samples": 5, "note": "x"}))
    assert read_progress(str(path)) == {"samples": 5.0}
