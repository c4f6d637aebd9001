import math
from pathlib import Path

import pytest

from radt_ext.figures import summaries as summaries_mod
from radt_ext.figures.active import Window
from radt_ext.figures.summaries import Stat, Summaries


def test_stat_trapezoid_integral_and_time_mean():
    s = Stat()
    for t, v in [(0.0, 100.0), (1.0, 200.0), (3.0, 200.0)]:
        s.add(t, v)
    assert s.integral == pytest.approx(150.0 + 400.0)
    assert s.time_mean == pytest.approx(550.0 / 3.0)
    assert (s.min, s.max, s.count) == (100.0, 200.0, 3)


def test_single_sample_time_mean_is_the_value():
    s = Stat()
    s.add(5.0, 42.0)
    assert s.time_mean == 42.0 and s.integral == 0.0


def test_gpu_energy_from_counter_and_power_from_counter_over_span():
    sm = Summaries()
    for t in range(11):  # two GPUs, 10 s; GPU0 at 100 W, GPU1 at 300 W
        sm.add("gpu0_energy_j", t, 100.0 * t)
        sm.add("gpu1_energy_j", t, 300.0 * t)
        sm.add("gpu0_power_w", t, 100.0)
        sm.add("gpu1_power_w", t, 300.0)
        sm.add("gpu0_temp_c", t, 40.0 + t)
        sm.add("gpu0_sm_active_pct", t, 50.0)
        sm.add("gpu1_sm_active_pct", t, 100.0)
    out = sm.result(0.0, 10.0, e2e_counts={"samples": 2000.0, "flops": 4e13})
    assert out["gpu_total_energy_j"] == pytest.approx(4000.0)
    assert out["e2e_gpu_total_energy_j"] == pytest.approx(4000.0)
    assert out["gpu0_energy_j"] == pytest.approx(1000.0) and out["gpu1_energy_j"] == pytest.approx(3000.0)
    assert out["gpu_total_energy_integrated_j"] == pytest.approx(4000.0)
    assert out["gpu_total_avg_power_w"] == pytest.approx(400.0)
    assert out["gpu1_avg_power_w"] == pytest.approx(300.0)
    assert out["gpu_max_peak_power_w"] == 300.0 and out["gpu0_peak_power_w"] == 100.0
    assert out["gpu_max_peak_temp_c"] == 50.0
    assert out["gpu_mean_avg_sm_active_pct"] == pytest.approx(75.0)
    assert out["gpu0_avg_sm_active_pct"] == pytest.approx(50.0)
    assert out["gpu_count"] == 2.0
    assert (out["active_s"], out["startup_s"], out["e2e_duration_s"], out["startup_share_pct"]) == (10.0, 0.0, 10.0, 0.0)
    assert out["samples"] == 2000.0
    assert out["throughput_samples_per_s"] == pytest.approx(200.0)
    assert out["energy_per_sample_j"] == pytest.approx(2.0)
    assert out["achieved_tflops"] == pytest.approx(4.0)


def test_mig_and_smi_names_do_not_count_as_gpu_power():
    sm = Summaries()
    sm.add("gpu0_mig1_sm_active_pct", 0, 90.0)
    sm.add("smi_gpu0_power_w", 0, 500.0)
    out = sm.result(0.0, 1.0)
    assert "gpu_mean_avg_sm_active_pct" not in out and "gpu_total_avg_power_w" not in out


def test_cpu_energy_and_process_peaks():
    sm = Summaries()
    for t in range(3):
        sm.add("cpu0_package_energy_j", t, 10.0 * t)
        sm.add("cpu0_dram_energy_j", t, 1.0 * t)
        sm.add("proc_rss_mib", t, [100.0, 300.0, 200.0][t])
    out = sm.result(0.0, 2.0, e2e_counts={"samples": 11.0})
    assert out["cpu_energy_j"] == pytest.approx(22.0)
    assert out["cpu_energy_per_sample_j"] == pytest.approx(2.0)
    assert out["proc_peak_rss_mib"] == 300.0
    assert "energy_per_sample_j" not in out  # no GPU energy measured


def test_no_samples_no_rates():
    out = Summaries().result(0.0, 0.0, e2e_counts={})
    assert out == {"e2e_duration_s": 0.0, "active_s": 0.0, "startup_s": 0.0}
    assert not any(math.isnan(v) for v in out.values())


def test_avg_power_from_counter_covers_the_same_span_as_its_energy():
    """The energy counter counts from the listener's open(); its first reading can come later (a reading
    that failed at first). The average power is the energy between the first and last readings over
    the time between them, not all energy since open over that time."""
    sm = Summaries()
    for t in range(2, 12):  # first reading at t=2 s already holds 2 s of energy at 100 W
        sm.add("gpu0_energy_j", t, 100.0 * t)
        sm.add("gpu0_power_w", t, 100.0)
    out = sm.result(0.0, 12.0)
    assert out["e2e_gpu_total_energy_j"] == pytest.approx(1100.0)  # since open
    assert out["e2e_gpu_total_avg_power_w"] == pytest.approx(100.0)


def test_summaries_of_the_nvml_listeners_50_hz_power_timeline(tmp_path):
    """The driver's power samples (each its own point) and the energy counter read at open and close only,
    as the `nvml` listener hands them out, through the streaming summaries."""
    import json
    import sys

    from listeners import nvml_backend
    from listeners.base import Target
    from listeners.nvml import NvmlListener
    from listeners.replay import Replay

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "listeners"))
    from nvml_fake import record_fake

    with nvml_backend.use(Replay(json.loads(json.dumps(record_fake(samples=3))))):
        listener = NvmlListener(Target(cuda_visible_devices=None))
        listener.open()
        readings = listener.sample() + listener.sample() + listener.closing_sample()
        listener.close()
    sm = Summaries()
    for r in readings:
        for name, value in r.values.items():
            sm.add(name, r.time, value)
    power = [(r.time, r.values["gpu0_power_w"]) for r in readings if "gpu0_power_w" in r.values]
    energy = [(r.time, r.values["gpu0_energy_j"]) for r in readings if "gpu0_energy_j" in r.values]
    assert len(power) == 50 and len(energy) == 2  # one second of 20 ms samples; the counter at open and close
    out = sm.result(readings[0].time - 0.5, readings[-1].time)
    trapezoid = sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(power, power[1:]))
    assert out["e2e_gpu_total_energy_integrated_j"] == pytest.approx(trapezoid)
    assert out["e2e_gpu_max_peak_power_w"] == max(v for _, v in power)
    assert out["e2e_gpu_total_energy_j"] == energy[-1][1]  # the counter: exact, whatever the power sampling did
    assert out["e2e_gpu_total_avg_power_w"] == pytest.approx(energy[-1][1] / (energy[-1][0] - energy[0][0]))


def _ramp(sm: Summaries, seconds: int = 100, hz: int = 10) -> None:
    """Power 100 W for the first 20 s (start-up), 400 W after; the counter integrates it exactly."""
    energy = 0.0
    for k in range(seconds * hz + 1):
        t = k / hz
        watts = 100.0 if t < 20 else 400.0
        if k:
            energy += watts / hz
        sm.add_all(1000.0 + t, [("gpu0_power_w", watts), ("gpu0_energy_j", energy), ("gpu0_sm_active_pct",
                                                                                     5.0 if t < 20 else 90.0)])


def test_active_window_figures_are_differences_of_cumulative_values_at_its_edges():
    sm = Summaries()
    _ramp(sm)
    window = Window(1030.0, 1090.0, "progress")
    out = sm.result(1000.0, 1100.0, window, active_counts={"samples": 6000.0}, e2e_counts={"samples": 8000.0})
    assert out["active_s"] == 60.0 and out["startup_s"] == 30.0 and out["e2e_duration_s"] == 100.0
    assert out["gpu_total_energy_j"] == pytest.approx(400.0 * 60, rel=1e-3)
    assert out["gpu_total_avg_power_w"] == pytest.approx(400.0, rel=1e-3)
    assert out["gpu_mean_avg_sm_active_pct"] == pytest.approx(90.0)
    assert out["throughput_samples_per_s"] == pytest.approx(100.0)
    assert out["energy_per_sample_j"] == pytest.approx(4.0, rel=1e-3)
    # the whole run counts the start-up at 100 W too
    assert out["e2e_gpu_total_energy_j"] == pytest.approx(100.0 * 20 + 400.0 * 80, rel=1e-3)
    assert out["e2e_throughput_samples_per_s"] == pytest.approx(80.0)
    assert out["e2e_gpu_mean_avg_sm_active_pct"] < 80.0


def test_window_edges_between_samples_are_interpolated():
    s = Stat()
    for t, v in [(0.0, 0.0), (10.0, 100.0)]:
        s.add(t, v)
    # a linear ramp: integral from 2.5 to 7.5 is 5 s x 50 = 250
    assert s.integral_over(2.5, 7.5) == pytest.approx(250.0)
    assert s.rise_over(2.5, 7.5) == pytest.approx(50.0)
    assert s.peak_over(2.0, 3.0) == pytest.approx(30.0)
    assert s.peak_over(-5.0, 20.0) == 100.0


def test_thinned_log_keeps_memory_bounded_and_windows_close(monkeypatch):
    monkeypatch.setattr(summaries_mod, "CHECKPOINTS", 256)
    sm, reference = Summaries(), Summaries()
    _ramp(sm)
    monkeypatch.setattr(summaries_mod, "CHECKPOINTS", 10**9)
    _ramp(reference)
    stat = sm.stat("gpu0_power_w")
    assert len(stat.ts) < 256 and stat.count == 1001
    for a, b in ((1030.0, 1090.0), (1000.0, 1100.0), (1010.0, 1095.0)):
        mine, exact = sm.figures(a, b), reference.figures(a, b)
        assert mine["gpu_total_energy_j"] == pytest.approx(exact["gpu_total_energy_j"], rel=0.02)
        assert mine["gpu_total_energy_integrated_j"] == pytest.approx(exact["gpu_total_energy_integrated_j"], rel=0.02)
        assert mine["gpu_max_peak_power_w"] == exact["gpu_max_peak_power_w"]
    assert stat.integral == pytest.approx(reference.stat("gpu0_power_w").integral)


def test_gpu_busy_span_from_utilization_else_sm_active_even_in_a_thinned_log(monkeypatch):
    sm = Summaries()
    for t in range(100, 131):  # GPU0 busy from 105 to 112 s, GPU1 (SM active only) from 108 to 120 s
        sm.add("gpu0_util_pct", t, 90.0 if 105 <= t <= 112 else 2.0)
        sm.add("gpu0_sm_active_pct", t, 0.0)  # utilization is read: it decides for GPU0
        sm.add("gpu1_sm_active_pct", t, 60.0 if 108 <= t <= 120 else 5.0)
    out = sm.result(100.0, 130.0)
    assert (out["gpu_busy_from_s"], out["gpu_busy_until_s"]) == (5.0, 20.0)
    assert sm.busy(113.0, 130.0) == (113.0, 120.0)
    assert "gpu_busy_from_s" not in Summaries().result(0.0, 1.0)  # no GPU read: no span
    monkeypatch.setattr(summaries_mod, "CHECKPOINTS", 16)  # thinned: the span widens to the checkpoints around it
    thin = Stat()
    for t in range(64):
        thin.add(float(t), 50.0 if t == 11 else 0.0)
    first, last = thin.reaching(10.0, 0.0, 63.0)
    k = list(thin.ts).index(last)
    assert len(thin.ts) < 64 and thin.ts[k - 1] == first < 11.0 <= last  # the one segment holding the spike
    assert thin.reaching(60.0, 0.0, 63.0) is None
