"""The store's shape of a timeline: bounded points, every peak and dip kept, steps at their own time."""
import math
import random

from radt_ext.store.shaper import BUCKET_S, FAST_BUCKET_S, KEEPALIVE_S, StoreShaper

T0 = 1_700_000_000_000  # ms since the epoch of step 0


def shaped(readings, key="system/gpu0_power_w", **kw):
    """The stored points [(ms, value)] of one metric's readings [(step ms, value)]."""
    out = []
    shaper = StoreShaper(lambda k, v, t, s: out.append((k, v, t, s)), **kw)
    for step, value in readings:
        shaper.add(key, value, T0 + step, step)
    shaper.flush()
    assert all(k == key and t == T0 + s for k, v, t, s in out)
    return sorted((s, v) for k, v, t, s in out), shaper


def line_at(points, x):
    """The chart's value at step x: linear between stored points."""
    for (s0, v0), (s1, v1) in zip(points, points[1:]):
        if s0 <= x <= s1:
            return v0 if s1 == s0 else v0 + (v1 - v0) * (x - s0) / (s1 - s0)
    return points[0][1] if x < points[0][0] else points[-1][1]


def test_fast_power_keeps_each_seconds_peak_and_dip_within_two_points_a_second():
    rng = random.Random(1)
    readings = [(i * 20, round(300 + 100 * math.sin(i / 40) + rng.uniform(-30, 30), 3)) for i in range(50 * 120)]
    stored, shaper = shaped(readings)
    assert len(stored) <= 2 * 120 + 2
    assert set(stored) <= set(readings)  # real readings at their own times
    bucket = int(FAST_BUCKET_S * 1000)
    for b in range(120):
        inside = [v for s, v in readings if b * bucket <= s < (b + 1) * bucket]
        kept = [v for s, v in stored if b * bucket <= s < (b + 1) * bucket]
        assert max(kept) == max(inside) and min(kept) == min(inside)
    assert stored[0] == readings[0] and stored[-1] == readings[-1]  # the chart spans the run; latest = last reading
    assert shaper.left_out == len(readings) - len(stored)


def test_a_step_stays_a_step_at_its_own_time():
    readings = [(i * 100, 0.0 if i < 237 else 100.0) for i in range(600)]
    stored, _ = shaped(readings, key="system/gpu0_util_pct")
    assert (23_600, 0.0) in stored and (23_700, 100.0) in stored
    for x in range(0, 60_000, 50):  # the chart of the stored points draws the readings' steps
        truth = 0.0 if x <= 23_600 else (100.0 if x >= 23_700 else None)
        if truth is not None:
            assert line_at(stored, x) == truth


def test_a_flat_metric_stores_its_first_point_a_keepalive_a_minute_and_its_last():
    readings = [(i * 100, 42.0) for i in range(3000)]  # 300 s
    stored, _ = shaped(readings, key="system/gpu0_pstate_num")
    assert stored[0] == (0, 42.0) and stored[-1] == readings[-1]
    gaps = [b[0] - a[0] for a, b in zip(stored, stored[1:])]
    assert len(stored) <= 300 / KEEPALIVE_S + 2 and max(gaps) <= KEEPALIVE_S * 1000 + BUCKET_S * 1000


def test_a_busy_bucket_keeps_its_range_and_a_flat_stretch_after_it_is_drawn_flat():
    readings = [(i * 100, float(i % 7)) for i in range(100)]  # 10 s of noise...
    readings += [(10_000 + i * 100, 3.5) for i in range(1, 600)]  # ...then 60 s flat
    stored, _ = shaped(readings, key="system/gpu0_sm_active_pct")
    noisy = [v for s, v in stored if s < 10_000]
    assert max(noisy) == 6.0 and min(noisy) == 0.0
    first_flat = min(s for s, v in stored if v == 3.5)
    assert first_flat <= BUCKET_S * 1000 + 100  # stored as it begins, not a ramp to its far end
    assert all(line_at(stored, x) == 3.5 for x in range(int(first_flat), 69_900, 100))


def test_a_counter_keeps_a_point_a_bucket_exact_where_stored():
    readings = [(i * 250, i * 75.0) for i in range(2400)]  # 600 s of energy at 300 W
    stored, _ = shaped(readings, key="system/gpu0_energy_j")
    assert len(stored) <= 600 / BUCKET_S + 2
    assert set(stored) <= set(readings) and stored[-1] == readings[-1]
    for x in range(0, 600_000, 1000):
        assert math.isclose(line_at(stored, x), 0.3 * x, rel_tol=1e-9, abs_tol=1e-6)


def test_buckets_follow_the_step_axis_so_metrics_and_runs_share_edges():
    out = []
    shaper = StoreShaper(lambda k, v, t, s: out.append((k, s)), bucket_s=10, fast_bucket_s=1)
    for i in range(300):  # two noisy metrics read at different times
        shaper.add("system/a_pct", float(i % 5), T0 + i * 100, i * 100)
        shaper.add("system/b_pct", float(i % 3), T0 + i * 100 + 37, i * 100 + 37)
    shaper.flush()
    for key in ("system/a_pct", "system/b_pct"):
        per_bucket = {}
        for k, s in out:
            if k == key:
                per_bucket[s // 10_000] = per_bucket.get(s // 10_000, 0) + 1
        assert sorted(per_bucket) == [0, 1, 2] and max(per_bucket.values()) <= 3
