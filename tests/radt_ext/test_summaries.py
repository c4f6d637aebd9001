import math

import pytest

from radt_ext.summaries import Stat, Summaries


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
    out = sm.result(duration_s=10.0, progress={"samples": 2000.0, "flops": 4e13})
    assert out["gpu_energy_j"] == pytest.approx(4000.0)
    assert out["gpu_energy_integrated_j"] == pytest.approx(4000.0)
    assert out["gpu_avg_power_w"] == pytest.approx(400.0)
    assert out["gpu_peak_power_w"] == 300.0
    assert out["gpu_peak_temp_c"] == 50.0
    assert out["gpu_avg_sm_active_pct"] == pytest.approx(75.0)
    assert out["samples"] == 2000.0
    assert out["throughput_samples_per_s"] == pytest.approx(200.0)
    assert out["energy_per_sample_j"] == pytest.approx(2.0)
    assert out["achieved_tflops"] == pytest.approx(4.0)


def test_mig_and_smi_names_do_not_count_as_gpu_power():
    sm = Summaries()
    sm.add("gpu0_mig1_sm_active_pct", 0, 90.0)
    sm.add("smi_gpu0_power_w", 0, 500.0)
    out = sm.result(1.0)
    assert "gpu_avg_sm_active_pct" not in out and "gpu_avg_power_w" not in out


def test_cpu_energy_and_process_peaks():
    sm = Summaries()
    for t in range(3):
        sm.add("cpu0_package_energy_j", t, 10.0 * t)
        sm.add("cpu0_dram_energy_j", t, 1.0 * t)
        sm.add("proc_rss_mib", t, [100.0, 300.0, 200.0][t])
    out = sm.result(2.0, {"samples": 11.0})
    assert out["cpu_energy_j"] == pytest.approx(22.0)
    assert out["cpu_energy_per_sample_j"] == pytest.approx(2.0)
    assert out["proc_peak_rss_mib"] == 300.0
    assert "energy_per_sample_j" not in out  # no GPU energy measured


def test_no_samples_no_rates():
    out = Summaries().result(0.0, {})
    assert out == {"duration_s": 0.0}
    assert not any(math.isnan(v) for v in out.values())


def test_avg_power_from_counter_covers_the_same_span_as_its_energy():
    """The energy counter counts from the listener's open(); its first reading can come later (a reading
    that failed at first). The average power is the energy between the first and last readings over
    the time between them, not all energy since open over that time."""
    sm = Summaries()
    for t in range(2, 12):  # first reading at t=2 s already holds 2 s of energy at 100 W
        sm.add("gpu0_energy_j", t, 100.0 * t)
        sm.add("gpu0_power_w", t, 100.0)
    out = sm.result(duration_s=12.0)
    assert out["gpu_energy_j"] == pytest.approx(1100.0)  # since open
    assert out["gpu_avg_power_w"] == pytest.approx(100.0)
