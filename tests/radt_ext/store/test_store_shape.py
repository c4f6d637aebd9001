"""The store's bounded shape moves no figure: on every committed trace with the driver's power samples, the
energies of a run recorded today equal those of the old path (every point into the store,
`--full-rate-store`) within 0.1 %, the timeline artifact holds exactly what the old path stored, and the
store holds a bounded number of rows."""
from __future__ import annotations

import os
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from listeners.base import Target
from listeners.nvml import NvmlListener
from radt_ext.figures.energy import power_integral_j, span_energy_j
from radt_ext.sampling.recorder import Recorder
from radt_ext.store import timelines
from radt_ext.store.shaper import BUCKET_S
from radt_ext.store.writer import MetricWriter
from tests.traces import TRACES

# the traces that hold the driver's power sample buffer (50 Hz power), with the GPUs each holds
SAMPLED = [("h200_matmul.json", "0"), ("h100_power_samples.json", "0"), ("h100x2_power_samples.json", "0,1")]
SECONDS = 6.0


def _series(points):
    return [t / 1000.0 for t, _, _ in points], [v for _, _, v in points]


def _store_series(client, run_id, key):
    history = sorted(client.get_metric_history(run_id, key), key=lambda m: (m.timestamp, m.step))
    return [m.timestamp / 1000.0 for m in history], [m.value for m in history]


def _energy(times, values, end):
    """A whole run's energy from its cumulative series, as the summary takes it: the counter read 0 at open."""
    joules, _ = span_energy_j(times, values, times[0], end)
    return values[0] + joules


@pytest.mark.slow
@pytest.mark.parametrize("trace,visible", SAMPLED, ids=[t for t, _ in SAMPLED])
def test_energy_of_the_old_and_the_new_path_agree(trace, visible, tracking_uri, monkeypatch):
    monkeypatch.setenv("RADT_EXT_NVML_REPLAY", os.path.join(TRACES, trace))
    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("shape")
    new = client.create_run(experiment).info.run_id
    recorder = Recorder(client, new, tracking_uri, [NvmlListener(Target(cuda_visible_devices=visible), None)],
                        full_rate=False).start()
    time.sleep(SECONDS)
    recorder.stop()
    summary = recorder.summary()
    start, end = recorder.started, recorder.stopped
    assert recorder.log_timelines(client, new) is None
    full = timelines.read(client, new)

    # the old path: the same points, every one, through the writer into a run of their own
    old = client.create_run(experiment).info.run_id
    writer = MetricWriter(client, old, tracking_uri).start()
    for key, points in full.items():
        for t, step, value in points:
            writer.add(key, value, t, step)
    writer.close()

    gpus = [f"gpu{i}" for i in range(len(visible.split(",")))]
    old_energy = sum(_energy(*_store_series(client, old, f"system/{g}_energy_j"), end) for g in gpus)
    new_energy = sum(_energy(*_store_series(client, new, f"system/{g}_energy_j"), end) for g in gpus)
    artifact_energy = sum(_energy(*_series(full[f"system/{g}_energy_j"]), end) for g in gpus)
    assert summary["e2e_gpu_total_energy_j"] > 0
    for joules in (old_energy, new_energy, artifact_energy):
        assert joules == pytest.approx(summary["e2e_gpu_total_energy_j"], rel=1e-3)
    integrated = sum(power_integral_j(list(zip(*_store_series(client, old, f"system/{g}_power_w"))), start, end)
                     for g in gpus)
    from_artifact = sum(power_integral_j(list(zip(*_series(full[f"system/{g}_power_w"]))), start, end) for g in gpus)
    assert integrated == pytest.approx(summary["e2e_gpu_total_energy_integrated_j"], rel=1e-3)
    assert from_artifact == pytest.approx(integrated, rel=1e-9)

    # nothing lost: the artifact holds exactly the points the old path stored (the store's key makes them a set)
    for key, points in full.items():
        stored = {(m.timestamp, m.step, m.value) for m in client.get_metric_history(old, key)}
        assert stored == set(points), key
    # and the store is bounded: the power timeline at most two points a second and GPU, the rest a few a bucket
    power = sum(len(client.get_metric_history(new, f"system/{g}_power_w")) for g in gpus)
    full_power = sum(len(full[f"system/{g}_power_w"]) for g in gpus)
    assert power < full_power  # the driver's samples were there, and fewer were stored
    assert power <= len(gpus) * (2 * (SECONDS + 2) + 2)
    for key in full:
        if not key.endswith("_power_w"):
            assert len(client.get_metric_history(new, key)) <= 2 * (SECONDS / BUCKET_S + 2) + 1, key
    tags = recorder.listener_tags()
    assert tags["radt_ext.store_shape"].startswith("minmax")
    assert int(tags["radt_ext.metrics_full_rate"]) == sum(len(p) for p in full.values())


def test_the_full_rate_option_keeps_every_point_in_the_store(tracking_uri, tmp_path):
    """`radt-ext run` at default settings stores the shape and logs the artifact; `--full-rate-store`
    stores every point the artifact holds."""
    from tests.radt_ext.helpers import radt

    runs = {}
    for label, flags in (("shaped", []), ("full", ["--full-rate-store"])):
        res = radt("run", "-l", "top", "-i", "0.05", "--run-name", label, *flags, "--", sys.executable, "-c",
                   "import time; t = time.time()\nwhile time.time() - t < 2: sum(range(1000))", cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-2000:]
    client = MlflowClient(tracking_uri)
    for run in client.search_runs([e.experiment_id for e in client.search_experiments()]):
        runs[run.info.run_name] = run
    for label, run in runs.items():
        tags = run.data.tags
        full = timelines.read(client, run.info.run_id)
        points = sum(len(p) for p in full.values())
        stored = sum(len(client.get_metric_history(run.info.run_id, k)) for k in full)
        assert points == int(tags["radt_ext.metrics_full_rate"]) > 0
        if label == "full":
            assert tags["radt_ext.store_shape"] == "full_rate" and stored == points
        else:
            assert tags["radt_ext.store_shape"].startswith("minmax") and stored < points
        assert stored == int(tags["radt_ext.metrics_stored"])


def test_the_full_rate_option_refuses_what_is_not_yes_or_no():
    from radt_ext.errors import UsageError
    from radt_ext.run.backend import _flag

    assert _flag({"full_rate_store": "true"}, "full_rate_store") and not _flag({}, "full_rate_store")
    with pytest.raises(UsageError, match="not true or false"):
        _flag({"full_rate_store": "sometimes"}, "full_rate_store")
    import radt_ext

    with pytest.raises(UsageError, match="not True or False"):
        with radt_ext.track(full_rate_store="yes"):
            pass


def test_a_timeline_the_store_took_leaves_nothing_in_the_spool(tracking_uri, tmp_path):
    """The file is made in a temporary folder: only one the store refuses goes to the spool."""
    from radt_ext.store.run_points import RunPoints

    client = MlflowClient(tracking_uri)
    run_id = client.create_run(client.create_experiment("took")).info.run_id
    points = RunPoints(lambda *point: None, spill_dir=str(tmp_path / "spill"))
    for i in range(200):
        points.add("system/gpu0_power_w", 300.0 + i % 7, 1_700_000_000_000 + 20 * i, 20 * i)
    points.flush()
    assert points.log_artifact(client, run_id, tracking_uri=tracking_uri) is None
    assert len(timelines.read(client, run_id)["system/gpu0_power_w"]) == 200
    assert not os.path.exists(os.environ["RADT_EXT_SPOOL_DIR"])
    assert list((tmp_path / "spill").iterdir()) == []  # its temporary folder went too


def test_a_timeline_the_store_did_not_take_is_logged_by_sync(tracking_uri, tmp_path):
    """The store away at a run's end: the timeline file stays in the spool directory and `radt-ext sync`
    logs it as the run's artifact once the store answers."""
    from radt_ext.store.run_points import RunPoints
    from tests.radt_ext.helpers import radt

    client = MlflowClient(tracking_uri)
    run_id = client.create_run(client.create_experiment("away")).info.run_id
    points = RunPoints(lambda *point: None)
    for i in range(500):
        points.add("system/gpu0_power_w", 300.0 + i % 7, 1_700_000_000_000 + 20 * i, 20 * i)
    points.flush()

    def away(fn):
        raise TimeoutError("the store was away at the run's end")

    reason = points.log_artifact(client, run_id, call=away, tracking_uri=tracking_uri)
    assert reason and "the file is" in reason and timelines.read(client, run_id) is None
    client.set_tag(run_id, "radt_ext.timelines_error", reason)  # as the run's end tags it
    res = radt("sync")
    assert res.returncode == 0, res.stderr
    assert f"timelines of run {run_id}: 1 file(s) logged" in res.stdout
    full = timelines.read(client, run_id)
    assert len(full["system/gpu0_power_w"]) == 500
    assert "radt_ext.timelines_error" not in client.get_run(run_id).data.tags  # the file it named is in
    assert "nothing to sync" in radt("sync").stdout  # the folder went with it
