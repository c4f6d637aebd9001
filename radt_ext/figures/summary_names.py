"""The names of a run's `summary/*` figures, and how names recorded by earlier versions read today.

Unprefixed names are over the run's active phase, `e2e_` + the same name over the whole run
(docs/runs.md has the table). Runs recorded before the active phase existed have whole-run figures
under the old names; `upgrade()` gives them their `e2e_` names, so comparisons, reports and sweep
tables read old and new runs alike (old runs have no active-phase figures).
"""
from __future__ import annotations

SUMMARY = "summary/"
E2E = "e2e_"

# old name -> today's name of the same whole-run figure
OLD_NAMES = {
    "duration_s": "e2e_duration_s",
    "gpu_energy_j": "e2e_gpu_total_energy_j",
    "gpu_energy_integrated_j": "e2e_gpu_total_energy_integrated_j",
    "gpu_avg_power_w": "e2e_gpu_total_avg_power_w",
    "gpu_peak_power_w": "e2e_gpu_max_peak_power_w",
    "gpu_peak_temp_c": "e2e_gpu_max_peak_temp_c",
    "gpu_peak_mem_temp_c": "e2e_gpu_max_peak_mem_temp_c",
    "gpu_peak_mem_mib": "e2e_gpu_max_peak_mem_mib",
    "gpu_peak_sm_clock_mhz": "e2e_gpu_max_peak_sm_clock_mhz",
    "gpu_avg_sm_active_pct": "e2e_gpu_mean_avg_sm_active_pct",
    "gpu_avg_sm_occupancy_pct": "e2e_gpu_mean_avg_sm_occupancy_pct",
    "gpu_avg_tensor_active_pct": "e2e_gpu_mean_avg_tensor_active_pct",
    "gpu_avg_dram_active_pct": "e2e_gpu_mean_avg_dram_active_pct",
    "gpu_avg_util_pct": "e2e_gpu_mean_avg_util_pct",
    "gpu_avg_temp_c": "e2e_gpu_mean_avg_temp_c",
    **{name: E2E + name for name in ("samples", "throughput_samples_per_s", "energy_per_sample_j", "cpu_energy_j",
                                     "cpu_energy_per_sample_j", "achieved_tflops", "proc_peak_rss_mib",
                                     "host_peak_mem_mib", "proc_avg_cpu_pct")},
}

# the figures a table shows first, when present: the active phase, its share of the run, then the whole run
HEADLINE = ["active_s", "startup_s", "startup_share_pct", "samples", "throughput_samples_per_s", "energy_per_sample_j",
            "epochs", "epoch_time_s", "epoch_energy_j", "first_epoch_time_s", "first_epoch_energy_j",
            "gpu_total_energy_j", "gpu_total_avg_power_w", "gpu_mean_avg_sm_active_pct",
            "gpu_mean_avg_tensor_active_pct", "gpu_mean_avg_dram_active_pct", "gpu_max_peak_power_w",
            "gpu_max_peak_temp_c", "gpu_max_peak_mem_mib", "achieved_tflops", "cpu_energy_j",
            "e2e_duration_s", "e2e_throughput_samples_per_s", "e2e_energy_per_sample_j", "e2e_gpu_total_energy_j",
            "e2e_gpu_total_energy_integrated_j", "e2e_gpu_total_avg_power_w", "e2e_gpu_mean_avg_sm_active_pct",
            "proc_avg_cpu_pct", "proc_peak_rss_mib"]


def recorded_before(metrics: dict[str, float], prefix: str = SUMMARY) -> bool:
    """Whether these are a run's metrics recorded under the old names."""
    return prefix + "duration_s" in metrics and prefix + "e2e_duration_s" not in metrics


def upgrade(metrics: dict[str, float], prefix: str = SUMMARY) -> dict[str, float]:
    """The metrics with old summary names given today's (`prefix` = "" for names without `summary/`);
    metrics recorded under today's names come back unchanged."""
    if not recorded_before(metrics, prefix):
        return metrics
    out = {}
    for key, value in metrics.items():
        name = key[len(prefix):] if key.startswith(prefix) else None
        out[prefix + OLD_NAMES[name] if name in OLD_NAMES else key] = value
    return out


def value(metrics: dict[str, float], name: str, prefix: str = SUMMARY) -> float | None:
    """A summary of a run by today's name, read under its old name for runs recorded before."""
    return upgrade(metrics, prefix).get(prefix + name)
