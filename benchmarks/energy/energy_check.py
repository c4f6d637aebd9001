"""Reads the energy-timeline proof's store and checks each run's counter energy against its power.

    python3 benchmarks/energy/energy_check.py STORE_URI OUT_DIR

For radt-ext's run: gpu0_energy_j's points a second and its largest gap, gpu0's counter energy against
the integral of its driver's power samples. For each run the script opened: summary/e2e_gpu0_energy_j, the
integral of radt-ext's run's power samples over the run's span, their ratio. Writes energy_timeline.json
and .md; exits 1 when a check fails.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from radt_ext.figures.energy import power_integral_j
from radt_ext.workload_api.markers import TAG_MONITOR_RUN


def history(client, run_id, key):
    """At the full rate: the run's timeline artifact where it has one, else the store."""
    from radt_ext.store import timelines

    return sorted((m.timestamp / 1000, m.value) for m in timelines.history(client, run_id, [key])[key])


def main(uri: str, out_dir: str) -> int:
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    monitors = [r for r in runs if TAG_MONITOR_RUN not in r.data.tags and "summary/e2e_gpu_total_energy_j" in r.data.metrics]
    monitor = max(monitors, key=lambda r: r.info.start_time)
    energy = history(client, monitor.info.run_id, "system/gpu0_energy_j")
    power = history(client, monitor.info.run_id, "system/gpu0_power_w")
    span = energy[-1][0] - energy[0][0]
    gaps = [b[0] - a[0] for a, b in zip(energy, energy[1:])]
    whole = {"run_id": monitor.info.run_id, "energy_points": len(energy),
             "energy_points_per_s": round(len(energy) / span, 2) if span else 0.0,
             "energy_max_gap_s": round(max(gaps), 3) if gaps else None,
             "monotone": all(b[1] >= a[1] for a, b in zip(energy, energy[1:])),
             # gpu0's counter against gpu0's power (the total adds the host's other GPUs)
             "counter_j": round(monitor.data.metrics.get("summary/e2e_gpu0_energy_j",
                                                         monitor.data.metrics["summary/e2e_gpu_total_energy_j"]), 1),
             "integrated_j": round(power_integral_j(power, energy[0][0], energy[-1][0]), 1),
             "power_source": monitor.data.tags.get("machine.gpu.0.power_source", "")}
    whole["counter_over_integrated"] = round(whole["counter_j"] / whole["integrated_j"], 4) if whole["integrated_j"] else None
    own = []
    a0, b0 = monitor.info.start_time / 1000, (monitor.info.end_time or 0) / 1000
    for r in runs:  # the script's runs: tagged with radt-ext's run, or (untagged: a failure) opened inside its span
        inside = r.info.run_id != monitor.info.run_id and r.info.experiment_id == monitor.info.experiment_id \
            and a0 <= r.info.start_time / 1000 <= b0
        if r.data.tags.get(TAG_MONITOR_RUN) != monitor.info.run_id and not inside:
            continue
        a, b = r.info.start_time / 1000, r.info.end_time / 1000
        # gpu0's counter energy over the run's span against gpu0's power (the total adds the host's other GPUs)
        got = r.data.metrics.get("summary/e2e_gpu0_energy_j", r.data.metrics.get("summary/e2e_gpu_total_energy_j"))
        integ = power_integral_j(power, a, b)
        own.append({"name": r.info.run_name, "tagged": r.data.tags.get(TAG_MONITOR_RUN) == monitor.info.run_id, "span_s": round(b - a, 3), "counter_j": got and round(got, 1),
                    "integrated_j": round(integ, 1),
                    "ratio": round(got / integ, 4) if got and integ else None,
                    "total_j": r.data.metrics.get("summary/e2e_gpu_total_energy_j"),
                    "total_integrated_j": r.data.metrics.get("summary/e2e_gpu_total_energy_integrated_j")})
    own.sort(key=lambda x: x["span_s"])
    failed = []
    if not whole["energy_max_gap_s"] or whole["energy_max_gap_s"] > 1.0:
        failed.append(f"gpu0_energy_j has a gap of {whole['energy_max_gap_s']} s (want <= 1 s)")
    if not whole["monotone"]:
        failed.append("gpu0_energy_j is not monotone")
    if not own:
        failed.append("no run opened by the script was found")
    for x in own:
        if not x["tagged"]:
            failed.append(f"run {x['name']}: not tagged as the workload's run (radt-ext's run context provider "
                          "not loaded: is radt-ext installed, or its entry points on the path?)")
        if not x["counter_j"]:
            failed.append(f"run {x['name']}: no counter energy")
        elif x["span_s"] >= 5 and abs(x["ratio"] - 1) > 0.01:
            failed.append(f"run {x['name']} ({x['span_s']} s): counter/integrated {x['ratio']} (want within 1 %)")
        elif abs(x["ratio"] - 1) > 0.03:
            failed.append(f"run {x['name']} ({x['span_s']} s): counter/integrated {x['ratio']} (want within 3 %)")
    result = {"monitor_run": whole, "script_runs": own, "failed": failed}
    out = Path(out_dir)
    (out / "energy_timeline.json").write_text(json.dumps(result, indent=1))
    lines = ["| run | span s | counter J | integrated power J | ratio |", "|---|---|---|---|---|",
             f"| radt-ext's run | {span:.2f} | {whole['counter_j']} | {whole['integrated_j']} | {whole['counter_over_integrated']} |"]
    lines += [f"| {x['name']} | {x['span_s']} | {x['counter_j']} | {x['integrated_j']} | {x['ratio']} |" for x in own]
    lines += ["", f"gpu0_energy_j: {whole['energy_points']} points, {whole['energy_points_per_s']} a second, "
              f"largest gap {whole['energy_max_gap_s']} s, monotone {whole['monotone']}",
              f"power source: {whole['power_source']}", "", "failed: " + ("; ".join(failed) or "none")]
    (out / "energy_timeline.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
