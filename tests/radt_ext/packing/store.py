"""Profiles and measured groups written into a real SQLite store through MLflow's client, as the
collocation runs write them (an exclusive parent with its one child; a collocated parent with a child
per workload and the pair measured side by side). SM active, duration, average power (energy / makespan) and the
measured slowdowns are those of the H200 collocation sweep (docs/validation/collocation/
collocation_table.json: ResNet-18 32 px at batch 128, ResNet-50 224 px, the DLRM recipe); DRAM active,
utilization, peak memory and idle power were not in that table and are set here."""
from __future__ import annotations

import time

from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from radt_ext.collocation import pairs

GPU_MIB = 143771.0  # the H200's memory (machine tag of its runs)

# name: (SM active %, DRAM active %, NVML util %, peak memory MiB, avg power W, duration s)
H200 = {
    "cnn": (2.8, 1.5, 9.0, 2100.0, 123.3, 23.0),
    "heavy": (17.9, 12.0, 41.0, 21500.0, 184.7, 32.8),
    "dlrm": (11.2, 22.0, 35.0, 61000.0, 161.5, 32.4),
}
IDLE_W = 75.0


def _end(client, run_id, metrics: dict[str, float], tags: dict[str, str]) -> None:
    client.log_batch(run_id, metrics=[Metric(f"summary/{k}", v, 0, 0) for k, v in metrics.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(run_id, "FINISHED")


def log_profile(uri: str, experiment: str, key: str, figures: tuple, gpu_mib: float = GPU_MIB,
                model: str | None = None, whole: tuple | None = None, energy_j: float | None = None,
                startup_s: float | None = None, busy: tuple[float, float] | None = None,
                child_later_s: float = 0.0, throughput: float | None = 1000.0, cpu_pct: float | None = None,
                cores: int | None = None) -> str:
    """An exclusive group run of one job with these figures (measured on a GPU `model`, as a pooled
    variant's child says); returns the child run id. Without `whole`, a run recorded under the old
    names (whole-run figures only); with it, today's names: `figures` over the active phase and
    `whole` (the same fields) over the whole run. `energy_j`: the job's attributed GPU energy over its
    whole run; `startup_s`: its start-up as logged (else whole run less active phase); `busy`: the
    span the parent's GPU was busy, from the parent's start, the child starting `child_later_s` after it;
    `throughput`: its samples/s (None: a job that reports no progress); `cpu_pct`: its CPU (100 = a
    core); `cores`: the host's logical CPUs."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    began = int(time.time() * 1000)
    parent = client.create_run(exp_id, start_time=began).info.run_id
    if whole is None:
        sm, dram, util, mem, power, duration = figures
        device = {"gpu_avg_sm_active_pct": sm, "gpu_avg_dram_active_pct": dram, "gpu_avg_util_pct": util,
                  "gpu_peak_mem_mib": mem, "gpu_avg_power_w": power, "duration_s": duration + 2.0}
        own = {"duration_s": duration}
    else:
        device, own = {}, {}
        for prefix, figs in (("", figures), ("e2e_", whole)):
            sm, dram, util, mem, power, duration = figs
            device.update({f"{prefix}gpu_mean_avg_sm_active_pct": sm, f"{prefix}gpu_mean_avg_dram_active_pct": dram,
                           f"{prefix}gpu_mean_avg_util_pct": util, f"{prefix}gpu_max_peak_mem_mib": mem,
                           f"{prefix}gpu_total_avg_power_w": power})
            span = "e2e_duration_s" if prefix else "active_s"
            device[span], own[span] = duration + (2.0 if prefix else 0.0), duration
    if energy_j is not None:
        own["gpu_energy_attributed_j"] = energy_j
    if throughput is not None:
        own["throughput_samples_per_s" if whole is not None else "e2e_throughput_samples_per_s"] = throughput
    if cpu_pct is not None:
        own["proc_avg_cpu_pct" if whole is not None else "e2e_proc_avg_cpu_pct"] = cpu_pct
    if startup_s is not None:
        own["startup_s"] = startup_s
    if busy is not None:
        device["gpu_busy_from_s"], device["gpu_busy_until_s"] = busy
    _end(client, parent, {**device, "gpu_idle_power_w": IDLE_W},
         {"collocation.mode": "exclusive", "collocation.size": "1", "machine.gpu.0.memory_total_mib": str(gpu_mib)})
    child = client.create_run(exp_id, start_time=began + int(child_later_s * 1000),
                              tags={"mlflow.parentRunId": parent}).info.run_id
    _end(client, child, own,
         {"collocation.mode": "exclusive", "sweep.workload_hash": key, **({"sweep.gpu_model": model} if model else {}),
          **({"machine.cpu_logical_cores": str(cores)} if cores else {})})
    return child


def log_pair(uri: str, experiment: str, mode: str, members: list[tuple[str, str, float]], model: str | None = None,
             tag: str | None = None, startups: list[dict] | None = None) -> str:
    """A collocated group run as group.py leaves it: a child per (workload name, workload hash) and the
    parent's `collocation.pairs` tag with the first two members' slowdowns side by side (`tag`: that
    tag's text as given; `startups`: its `collocation.startup_pairs`, by workload name, in place of the side
    by side pair); measured on a GPU `model` where given. Returns the parent id."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    parent = client.create_run(exp_id).info.run_id
    for name, key, _ in members:
        child = client.create_run(exp_id, tags={"mlflow.parentRunId": parent}).info.run_id
        client.log_batch(child, tags=[RunTag(k, v) for k, v in {
            "collocation.mode": mode, "collocation.workload": name, "sweep.workload_hash": key,
            **({"sweep.gpu_model": model} if model else {})}.items()])
        client.set_terminated(child, "FINISHED")
    (a, _, xa), (b, _, xb) = members[:2]
    if startups is not None:
        measured = RunTag(pairs.STARTUP_TAG, pairs.text(startups))
    else:
        measured = RunTag(pairs.TAG, pairs.text([{"a": a, "b": b, "slowdowns": [xa, xb], "span_s": 10.0}])
                          if tag is None else tag)
    client.log_batch(parent, tags=[RunTag("collocation.mode", mode), RunTag("collocation.size", str(len(members))),
                                   measured])
    client.set_terminated(parent, "FINISHED")
    return parent
