"""A span's energy from the cumulative gpu{i}_energy_j series: interpolated at both ends, clamped to
where the series was recorded."""
from __future__ import annotations

from radt_ext.figures.energy import EnergySeries, span_energy_j


def test_span_energy_interpolates_and_clamps_to_what_was_recorded():
    times, values = [10.0, 11.0, 12.0], [0.0, 100.0, 300.0]
    assert span_energy_j(times, values, 10.5, 11.5) == (150.0, 1.0)
    assert span_energy_j(times, values, 0.0, 99.0) == (300.0, 2.0)  # before the first read: unknown, left out
    assert span_energy_j(times, values, 20.0, 30.0) == (0.0, 0.0)
    assert span_energy_j([], [], 0.0, 1.0) is None


def test_series_keeps_each_gpu_in_order_and_says_when_it_has_passed_a_time():
    series = EnergySeries()
    assert series.covers(5.0) and series.over(0.0, 1.0) == {}  # nothing recorded: nothing to wait for
    for t, e in ((1.0, 0.0), (2.0, 50.0), (2.0, 60.0), (3.0, 150.0)):
        series.add("gpu0_energy_j", t, e)
    series.add("gpu1_energy_j", 1.0, 0.0)
    assert not series.covers(2.5)  # gpu1's segment up to 2.5 is not closed yet
    series.add("gpu1_energy_j", 4.0, 30.0)
    assert series.covers(2.5)
    assert series.over(1.5, 2.5) == {"gpu0_energy_j": (75.0, 1.0), "gpu1_energy_j": (10.0, 1.0)}
