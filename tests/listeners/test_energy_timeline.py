"""The energy timeline between counter reads, fed the power samples and counter readings an H100
recorded (listeners/traces/h100_power_samples.json: idle, a bf16 matmul, idle), as the `nvml`
listener feeds it: drains of the driver's buffer, a counter read after draining up to it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from listeners.energy_timeline import EnergyTimeline
from radt_ext.figures.energy import power_integral_j, span_energy_j

TRACE = Path(__file__).resolve().parents[2] / "listeners" / "traces" / "h100_power_samples.json"


def _recorded():
    calls = json.loads(TRACE.read_text())["calls"]
    counter = [(r[0]["fields"]["timestamp"] / 1e6, r[0]["fields"]["value"]["fields"]["ullVal"] / 1000)
               for r in calls["nvmlDeviceGetFieldValues"]['[{"ref":"dev0"},[83]]']]
    answers = calls["nvmlDeviceGetSamples"]['[{"ref":"dev0"},0,"*"]']
    drains = [[(t / 1e6, v / 1000) for t, v in a["samples"]] for a in answers[1:] if "samples" in a]
    return counter, drains


def _timeline(reads):
    """Points of the timeline for counter reads at `reads` (indices into the recorded readings)."""
    counter, drains = _recorded()
    reads = [counter[i] for i in reads]
    t0, e0 = reads[0]
    timeline, points, k = EnergyTimeline(t0), [(t0, 0.0)], 1
    for drain in drains:
        while k < len(reads) and drain and drain[-1][0] > reads[k][0]:  # the read drains up to itself first
            timeline.power([s for s in drain if s[0] <= reads[k][0]])
            drain = [s for s in drain if s[0] > reads[k][0]]
            points += timeline.counter(reads[k][0], reads[k][1] - e0)
            k += 1
        timeline.power(drain)
    for t, e in reads[k:]:
        points += timeline.counter(t, e - e0)
    power = sorted({t: w for d in drains for t, w in d}.items())
    return points, [(t, e - e0) for t, e in reads], power


def _windows(points, length, step=0.13):
    a = points[0][0]
    while a + length <= points[-1][0]:
        yield a, a + length
        a += step


def test_a_run_read_at_open_and_close_only_gets_its_energy_course_at_four_points_a_second():
    points, reads, power = _timeline([0, 5])  # 24 s: shorter than the counter's period
    times, values = [t for t, _ in points], [e for _, e in points]
    assert [p for p in points if p in reads] == reads  # it meets the counter at both reads, exactly
    assert times == sorted(times) and values == sorted(values)  # in time order, monotone
    assert max(b - a for a, b in zip(times, times[1:])) <= 0.5  # >= 1 point a second (4 here)
    assert len(points) >= 3 * (times[-1] - times[0])
    for length, tolerance in ((2.0, 0.02), (5.0, 0.01), (8.0, 0.01)):
        for a, b in _windows(points, length):
            joules, seconds = span_energy_j(times, values, a, b)
            assert seconds == pytest.approx(length)
            assert joules == pytest.approx(power_integral_j(power, a, b), rel=tolerance), (a - times[0], length)


def test_each_read_fixes_its_segment_and_the_power_keeps_its_shape_inside():
    points, reads, power = _timeline([0, 3, 5])
    assert [p for p in points if p in reads] == reads
    values = [e for _, e in points]
    assert values == sorted(values)
    times = [t for t, _ in points]
    for (a, ea), (b, eb) in zip(reads, reads[1:]):  # each segment: the counter's rise, spread by the power
        scale = (eb - ea) / power_integral_j(power, a, b)
        assert scale == pytest.approx(1.0, abs=0.03)  # the sensor and the counter agree to a few %
        for lo, hi in _windows([(a, 0), (b, 0)], 5.0):
            joules, _ = span_energy_j(times, values, lo, hi)
            assert joules == pytest.approx(power_integral_j(power, lo, hi) * scale, rel=0.01)


def test_without_power_samples_the_counter_alone_as_before():
    timeline = EnergyTimeline(100.0)
    assert timeline.counter(130.0, 3000.0) == [(130.0, 3000.0)]
    assert timeline.counter(131.0, 3100.0) == [(131.0, 3100.0)]
    assert timeline.counter(131.0, 3200.0) == []  # no second point at one time


def test_samples_from_before_a_read_only_carry_the_power_across_it():
    timeline = EnergyTimeline(0.0)
    timeline.power([(0.1 * k, 100.0) for k in range(1, 11)])
    first = timeline.counter(1.0, 100.0)
    assert first[-1] == (1.0, 100.0) and [e for _, e in first] == sorted(e for _, e in first)
    timeline.power([(0.95, 100.0)] + [(1.0 + 0.1 * k, 300.0) for k in range(1, 11)])  # a late sample first
    second = timeline.counter(2.0, 400.0)
    assert second[-1] == (2.0, 400.0)
    assert all(100.0 < e < 400.0 for _, e in second[:-1])
    assert timeline.counter(3.0, 350.0) == [(3.0, 350.0)]  # a counter that went back: the read alone

