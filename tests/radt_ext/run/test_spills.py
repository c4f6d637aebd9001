"""What the watchdog logs of a killed radt-ext's spilled timelines: a real SQLite store, real spill files."""
from __future__ import annotations

import os

from mlflow.tracking import MlflowClient

from radt_ext.run import spills, watchdog
from radt_ext.store import timelines


def _spill(directory: str, n: int) -> None:
    spill = timelines.TimelineSpill(directory)
    for i in range(n):
        spill.add(f"system/k{i % 2}", float(i), 1000 + i, i)


def test_each_ended_run_gets_what_its_spill_file_holds_and_the_folder_goes(tracking_uri, tmp_path, monkeypatch):
    monkeypatch.setattr(timelines, "CHUNK", 4)
    client = MlflowClient(tracking_uri)
    exp = client.create_experiment("spills")
    own, work, empty = (client.create_run(exp).info.run_id for _ in range(3))
    root = str(tmp_path / "spill")
    _spill(spills.run_dir(root), 10)  # two chunks on disk, two points lost with the process
    _spill(spills.run_dir(root, work), 5)
    _spill(spills.run_dir(root, empty), 3)  # nothing reached the disk
    logged = spills.log_all_spilled(client, root, own, [own, work, empty])
    assert logged == {own: 8, work: 4}
    for rid, n in logged.items():
        assert sum(len(p) for p in timelines.read(client, rid).values()) == n
        assert client.get_run(rid).data.tags[spills.TAG_PARTIAL] == spills.PARTIAL
    assert timelines.read(client, empty) is None  # no empty artifact, and no tag
    assert spills.TAG_PARTIAL not in client.get_run(empty).data.tags
    assert not os.path.exists(root)


def test_a_failure_to_log_the_spilled_timelines_is_one_warning_line(tracking_uri, tmp_path, monkeypatch, capsys):
    def fails(*args):
        raise OSError("disk gone\nsecond line")

    monkeypatch.setattr(watchdog, "log_all_spilled", fails)
    watchdog._log_spilled(tracking_uri, str(tmp_path), "run", ["run"])
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("radt-ext:")]
    assert line == "radt-ext: warning: the killed runs' spilled timelines were not logged (OSError: disk gone)"
