"""The raw per-process sample recorder against the H200 recording: every sample of every process,
the process described once, a call the GPU cannot answer is one error line, not a crash."""
from __future__ import annotations

import json

from listeners.record_proc_samples import main


def test_records_every_sample_and_each_process_once(replay, tmp_path):
    out = tmp_path / "samples.jsonl"
    assert main(["--out", str(out), "--seconds", "1.0", "--interval", "0.02"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    util = [r for r in rows if r["kind"] == "util"]
    recorded = [s["fields"] for answer in
                replay["calls"]["nvmlDeviceGetProcessUtilization"]['[{"ref":"dev0"},"*"]']
                if isinstance(answer, list) for s in answer]
    assert util and [(u["pid"], u["ts_us"], u["sm"]) for u in util] == \
        [(s["pid"], s["timeStamp"], s["smUtil"]) for s in recorded[:len(util)]]
    procs = [r for r in rows if r["kind"] == "proc"]
    assert [p["pid"] for p in procs] == [replay["meta"]["load"]["pid"]]
    # the recording has no nvmlDeviceGetPowerUsage: one error line, and sampling went on
    errors = [r for r in rows if r["kind"] == "error"]
    assert [e["call"] for e in errors] == ["nvmlDeviceGetPowerUsage"]
