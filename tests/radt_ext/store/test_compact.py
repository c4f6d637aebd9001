"""`radt-ext compact`: a run recorded at the full rate rewritten into the store's shape, nothing lost."""
from __future__ import annotations

import math

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from radt_ext.store import timelines
from radt_ext.store.shaper import shape
from radt_ext.store.writer import MetricWriter
from tests.radt_ext.helpers import radt

T0 = 1_700_000_000_000


def _old_run(uri: str, name: str = "old") -> tuple[str, dict[str, list[tuple[int, int, float]]]]:
    """A run as radt-ext stored it before the shape: every point in the store, no timeline artifact."""
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("compact") or client.create_experiment("compact")
    experiment = getattr(experiment, "experiment_id", experiment)
    run_id = client.create_run(experiment, run_name=name).info.run_id
    points = {
        "system/gpu0_power_w": [(T0 + i * 20, i * 20, round(300 + 80 * math.sin(i / 9.0), 3)) for i in range(50 * 90)],
        "system/gpu0_util_pct": [(T0 + i * 100, i * 100, 0.0 if i < 400 else 100.0) for i in range(900)],
        "system/gpu0_energy_j": [(T0 + i * 250, i * 250, i * 75.0) for i in range(360)],
        "system/gpu0_temp_c": [(T0 + i * 100, i * 100, float(40 + i % 3)) for i in range(900)],
    }
    writer = MetricWriter(client, run_id, uri).start()
    for key, series in points.items():
        for t, step, value in series:
            writer.add(key, value, t, step)
    writer.close()
    client.log_batch(run_id, metrics=[Metric("summary/gpu0_energy_j", 26_925.0, T0 + 90_000, 0),
                                      Metric("loss", 0.5, T0 + 1000, 1), Metric("loss", 0.25, T0 + 2000, 2)])
    client.set_terminated(run_id, "FINISHED", end_time=T0 + 90_000)
    return run_id, points


def _stored(client, run_id, key):
    return {(m.timestamp, m.step, m.value) for m in client.get_metric_history(run_id, key)}


def test_compact_says_what_would_change_then_moves_the_full_rate_to_the_artifact(tracking_uri):
    client = MlflowClient(tracking_uri)
    run_id, points = _old_run(tracking_uri)
    rows = sum(len(p) for p in points.values())
    latest = client.get_run(run_id).data.metrics

    dry = radt("compact", "--experiment", "compact", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    expected = shape(sorted(((k, v, t, s) for k, series in points.items() for t, s, v in series),
                            key=lambda p: (p[0], p[3])))
    assert f"{rows:,}" in dry.stdout and f"{len(expected):,}" in dry.stdout and "nothing changed" in dry.stdout
    assert sum(len(_stored(client, run_id, k)) for k in points) == rows  # the dry run changed nothing
    assert timelines.read(client, run_id) is None

    done = radt("compact", "--experiment", "compact")
    assert done.returncode == 0, done.stderr
    assert "compacted 1 of 1 runs" in done.stdout
    full = timelines.read(client, run_id)  # every point first went to the artifact
    for key, series in points.items():
        assert set(full[key]) == set(series)
        kept = {(t, s, v) for k, v, t, s in expected if k == key}
        assert _stored(client, run_id, key) == kept  # the store holds today's shape
    after = client.get_run(run_id)
    assert after.data.metrics == latest  # latest values, summaries, the workload's own metrics: unmoved
    assert [m.value for m in client.get_metric_history(run_id, "loss")] == [0.5, 0.25]
    assert after.data.tags["radt_ext.store_shape"].startswith("minmax")
    # the report and the planner read the full rate back
    history = timelines.history(client, run_id, ["system/gpu0_power_w", "loss"])
    assert len(history["system/gpu0_power_w"]) == len(points["system/gpu0_power_w"]) and len(history["loss"]) == 2

    again = radt("compact", run_id)
    assert again.returncode == 0 and "already in shape" in again.stdout, again.stdout


def test_compact_refuses_bad_input_in_one_line(tracking_uri):
    run_id, _ = _old_run(tracking_uri)
    cases = [
        (["compact"], "name the runs"),
        (["compact", run_id, "--experiment", "compact"], "not both"),
        (["compact", "0123456789abcdef0123456789abcdef"], "is not in this tracking store"),
        (["compact", "--experiment", "nope"], "is not in this store"),
        (["compact", run_id, "--tracking-uri", "http://127.0.0.1:9"], "database URI"),
        (["compact", run_id, "--tracking-uri", "bogus://x"], ""),
    ]
    for args, words in cases:
        res = radt(*args)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2 and "Traceback" not in res.stderr, (args, res.stderr)
        assert len(lines) == 1 and words in lines[0], (args, res.stderr)
    client = MlflowClient(tracking_uri)
    assert len(client.get_metric_history(run_id, "system/gpu0_power_w")) == 50 * 90  # nothing ran
