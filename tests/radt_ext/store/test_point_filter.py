"""What reaches the store: a metric's repeated values are held back, yet the stored points draw the same
chart (a flat stretch then a step stays a step: the last unchanged point is stored before the change),
the first and last points and a keep-alive point every few seconds are stored, the power timeline and the
per-process samples keep every point, and the summaries see every reading. The end-to-end tests run the
real Recorder into a real SQLite store."""
import random
import time

from mlflow.tracking import MlflowClient

from listeners.base import Listener, Reading, Target
from radt_ext.store.point_filter import PointFilter
from radt_ext.sampling.recorder import Recorder
from radt_ext.figures.summaries import Summaries


def thinned(points, keepalive_s=5.0, key="gpu0_temp_c"):
    stored = []
    f = PointFilter(lambda k, v, ts, step: stored.append((ts, v)), keepalive_s=keepalive_s)
    for ts, v in points:
        f.add(key, v, ts, ts)
    f.flush()
    return stored, f


def on_polyline(stored, ts):
    """The value a line chart of the stored points draws at time ts."""
    for (t0, v0), (t1, v1) in zip(stored, stored[1:]):
        if t0 <= ts <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (ts - t0) / (t1 - t0)
    raise AssertionError(f"{ts} outside the stored points")


def test_a_flat_stretch_then_a_step_stays_a_step():
    points = [(t * 100, 40.0) for t in range(10)] + [(t * 100, 45.0) for t in range(10, 13)]
    stored, f = thinned(points)
    # the first point, the last unchanged one right before the step, every changed one... and the last
    assert stored == [(0, 40.0), (900, 40.0), (1000, 45.0), (1200, 45.0)]
    assert f.received - f.passed == len(points) - len(stored)


def test_the_last_point_of_the_run_is_stored_at_flush():
    stored, _ = thinned([(0, 1.0), (100, 1.0), (200, 1.0)])
    assert stored == [(0, 1.0), (200, 1.0)]


def test_a_keep_alive_point_at_least_every_keepalive():
    points = [(t * 100, 7.0) for t in range(0, 121)]  # 12 s flat at 10 Hz
    stored, _ = thinned(points, keepalive_s=5.0)
    assert [ts for ts, _ in stored] == [0, 5000, 10000, 12000]
    gaps = [b[0] - a[0] for a, b in zip(stored, stored[1:])]
    assert max(gaps) <= 5000


def test_values_that_change_every_tick_are_all_stored():
    points = [(t * 20, 100.0 + t % 7) for t in range(200)]
    stored, f = thinned(points)
    assert stored == points and f.received == f.passed


def test_every_point_lies_on_the_chart_of_the_stored_points():
    rng = random.Random(5)
    value, points = 0.0, []
    for t in range(3000):  # long flats, short bursts, a few returns to an earlier value
        if rng.random() < 0.05:
            value = rng.choice([0.0, 1.0, 2.0, value + rng.random()])
        points.append((t * 100, value))
    stored, _ = thinned(points, keepalive_s=5.0)
    assert len(stored) < len(points) / 3
    assert stored[0] == points[0] and stored[-1] == points[-1]
    for ts, v in points:
        assert abs(on_polyline(stored, ts) - v) < 1e-9, ts


def test_the_power_timeline_and_per_process_samples_keep_every_point():
    for key in ("system/gpu0_power_w", "gpu1_energy_j", "system/gpu0_proc_sm_pct", "gpu0_proc_mem_util_pct",
                "system/gpu0_mig1_sm_active_pct"):
        points = [(t * 20, 80.0) for t in range(50)]
        stored, _ = thinned(points, key=key)
        assert stored == points, key
    stored, _ = thinned([(t * 20, 80.0) for t in range(50)], key="system/smi_gpu0_power_instant_w")
    assert len(stored) == 2


class Script(Listener):
    """A listener that hands out a fixed script of readings, a few per sample, at times just past."""
    name = "script"

    def __init__(self, script):
        super().__init__(Target(), 0.01)
        self.script = list(script)

    def sample(self):
        out, self.script = self.script[:20], self.script[20:]
        return out


def _script(now):
    """20 s of readings at 10 Hz: a temperature flat, then a step; a clock that changes every tick; power
    at 50 Hz that sits still for a while."""
    readings = []
    for i in range(200):
        t = now - 20 + i * 0.1
        readings.append(Reading(t, {"gpu0_temp_c": 40.0 if i < 120 else 44.0,
                                    "gpu0_sm_clock_mhz": 1000.0 + i,
                                    "gpu0_mem_used_mib": 512.0}))
        for j in range(5):
            readings.append(Reading(t + j * 0.02, {"gpu0_power_w": 70.0 if i < 50 else 70.0 + j}))
    return readings


def test_the_recorder_stores_the_thinned_points_and_summarises_every_reading(tracking_uri):
    client = MlflowClient(tracking_uri)
    run = client.create_run(client.create_experiment("thin"))
    now = time.time()
    script = _script(now)
    # the full rate into the store (--full-rate-store): the store then holds exactly what the filter passes,
    # as the timeline artifact does at default settings (tests/radt_ext/store/test_store_shape.py)
    recorder = Recorder(client, run.info.run_id, tracking_uri, [Script(script)], t0=now - 20, full_rate=True).start()
    deadline = time.time() + 30
    while recorder.monitor.states["script"].samples < len(script) and time.time() < deadline:
        time.sleep(0.05)
    recorder.stop()

    def history(name):
        return sorted((m.timestamp, m.value) for m in client.get_metric_history(run.info.run_id, "system/" + name))

    def every(name):
        return sorted((int(r.time * 1000), r.values[name]) for r in script if name in r.values)

    temp = history("gpu0_temp_c")
    first, before, after, last = every("gpu0_temp_c")[0], every("gpu0_temp_c")[119], every("gpu0_temp_c")[120], \
        every("gpu0_temp_c")[-1]
    assert first in temp and before in temp and after in temp and last in temp
    for ts, v in every("gpu0_temp_c"):
        assert on_polyline(temp, ts) == v
    assert max(b[0] - a[0] for a, b in zip(temp, temp[1:])) <= 5000
    assert len(temp) < 20
    assert history("gpu0_sm_clock_mhz") == every("gpu0_sm_clock_mhz")
    assert history("gpu0_power_w") == every("gpu0_power_w")  # the power timeline: every point, flat or not
    mem = history("gpu0_mem_used_mib")
    assert mem[0] == every("gpu0_mem_used_mib")[0] and mem[-1] == every("gpu0_mem_used_mib")[-1]
    latest = client.get_run(run.info.run_id).data.metrics
    assert latest["system/gpu0_temp_c"] == 44.0

    tags = recorder.listener_tags()
    stored = sum(len(history(n)) for n in ("gpu0_temp_c", "gpu0_sm_clock_mhz", "gpu0_mem_used_mib", "gpu0_power_w"))
    assert int(tags["radt_ext.metrics_stored"]) == int(tags["radt_ext.metrics_sent"]) == stored
    assert int(tags["radt_ext.metrics_repeated"]) == sum(len(r.values) for r in script) - stored

    every_reading = Summaries()
    for r in script:
        for name, value in r.values.items():
            every_reading.add(name, r.time, value)
    assert recorder.summary() == every_reading.result(recorder.started, recorder.stopped)
