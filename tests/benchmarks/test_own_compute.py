"""benchmarks/packing/own_compute.py: each job's line found in the alone pass's log, its rate against plain."""
from __future__ import annotations

import json

from benchmarks.packing import own_compute


def test_each_job_is_found_by_its_line_and_a_timed_job_by_its_work(tmp_path):
    plain = {"jobs": {
        "gru32": {"last": "gru_train: 100 steps, 3200 samples, loss 0.123, 10.000 s"},
        "gru128": {"last": "gru_train: 100 steps, 12800 samples, loss 0.456, 20.000 s"},
        "timed": {"last": "done: 900 iterations (57600 samples) of conv in 10.0 s"},
        "gone": {"last": "never printed: 1.0 s"}}}
    log = "\n".join(["[0] exclusive gru32-0 on 0: FINISHED",
                     "gru_train: 100 steps, 12800 samples, loss 0.400, 22.000 s",
                     "gru_train: 100 steps, 3200 samples, loss 0.100, 10.500 s",
                     "done: 600 iterations (38400 samples) of conv in 10.0 s"])
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    (tmp_path / "alone.log").write_text(log)
    own_compute.main(["--results", str(tmp_path)])
    found = json.loads((tmp_path / "own_compute.json").read_text())
    assert set(found) == {"gru32", "gru128", "timed"}
    assert found["gru32"]["alone_s"] == 10.5 and found["gru32"]["cost_pct"] == 5.0
    assert found["gru128"]["alone_s"] == 22.0 and found["gru128"]["cost_pct"] == 10.0
    assert found["timed"]["alone_samples"] == 38400 and found["timed"]["cost_pct"] == 50.0
